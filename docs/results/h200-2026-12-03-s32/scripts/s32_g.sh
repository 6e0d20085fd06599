set -x
tar -C .dev -xJf .dev/cache32f.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache32f
source .dev/env.sh
(cd packages/chord-kernels && timeout 280 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -3) | tee $OUT/gpu_kernels_g.log
(cd packages/chord-vllm && timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_core.py 2>&1 | tail -1) | tee $OUT/gpu_vllm_g.log
