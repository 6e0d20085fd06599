set -x
tar -C .dev -xJf .dev/cache29f.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache29f
source .dev/env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
git log --oneline | head -1
ROUNDS=7 timeout 200 python3 .dev/s29/whole_ab.py time 2>&1 | tee $OUT/whole_ab2.log
(cd packages/chord-kernels && timeout 230 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -4) | tee $OUT/gpu_kernels.log
(cd packages/chord-vllm && timeout 90 python3 -m pytest -q -p no:cacheprovider tests/test_core.py 2>&1 | tail -2) | tee $OUT/gpu_vllm.log
(cd packages/chord-bench && timeout 60 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -3) | tee $OUT/gpu_bench.log
