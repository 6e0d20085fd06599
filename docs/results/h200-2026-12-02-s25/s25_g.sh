set -x
tar -C .dev -xJf .dev/cache.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache
source .dev/env.sh
python3 .dev/s25/precompile_tests.py 16 2>&1 | tail -3 | tee $OUT/precompile.log
(cd packages/chord-kernels && timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -4) | tee $OUT/gpu_kernels.log
(cd packages/chord-vllm && timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_core.py 2>&1 | tail -2) | tee $OUT/gpu_vllm.log
(cd packages/chord-bench && timeout 100 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -2) | tee $OUT/gpu_bench.log
