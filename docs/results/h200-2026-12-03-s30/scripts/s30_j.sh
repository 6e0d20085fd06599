set -x
tar -C .dev -xJf .dev/cache30b.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache30b
source .dev/env.sh
(cd packages/chord-kernels && timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -2) | tee $OUT/gpu_kernels_final.log
(cd packages/chord-vllm && timeout 90 python3 -m pytest -q -p no:cacheprovider tests/test_core.py 2>&1 | tail -1) | tee -a $OUT/gpu_vllm_final.log
