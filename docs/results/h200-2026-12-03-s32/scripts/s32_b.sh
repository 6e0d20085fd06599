set -x
tar -C .dev -xJf .dev/cache32f.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache32f
source .dev/env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
.dev/s32/dequant_exhaustive | tee $OUT/dequant_exhaustive_final.log
ROUNDS=7 OUT=$OUT timeout 120 python3 .dev/s32/ab.py shift time 2>&1 | tee $OUT/shift_ab.log
(cd packages/chord-kernels && timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -3) | tee $OUT/gpu_kernels.log
(cd packages/chord-vllm && timeout 90 python3 -m pytest -q -p no:cacheprovider tests/test_core.py 2>&1 | tail -2) | tee $OUT/gpu_vllm.log
(cd packages/chord-bench && timeout 60 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -2) | tee $OUT/gpu_bench.log
