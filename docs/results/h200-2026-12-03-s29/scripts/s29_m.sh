set -x
tar -C .dev -xJf .dev/cache29g.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache29g
source .dev/env.sh
(cd packages/chord-kernels && timeout 190 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -3) | tee $OUT/gpu_kernels_final.log
(cd packages/chord-vllm && timeout 40 python3 -m pytest -q -p no:cacheprovider tests/test_core.py 2>&1 | tail -1) | tee $OUT/gpu_vllm_final.log
