set -x
tar -C .dev -xJf .dev/cache34.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache34
source .dev/env.sh
git status --short | head; date -u
(cd packages/chord-kernels && timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -3) | tee $OUT/gpu_kernels.log
(cd packages/chord-vllm && timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_core.py 2>&1 | tail -1) | tee $OUT/gpu_vllm.log
(cd packages/chord-bench && timeout 120 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -1) | tee $OUT/gpu_bench.log
date -u
