set -x
mkdir -p .dev/cache45 && tar -C .dev -xJf .dev/cache45.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache45
source .dev/env.sh
git status --short | head; date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
(cd packages/chord-kernels && timeout 330 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -3) | tee $OUT/gpu_kernels_d.log
(cd packages/chord-bench && timeout 100 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -2) | tee $OUT/gpu_bench_d.log
(cd packages/chord-vllm && timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_core.py 2>&1 | tail -2) | tee $OUT/gpu_vllm_d.log
date -u
ls .dev/cache45/*.cubin | wc -l
