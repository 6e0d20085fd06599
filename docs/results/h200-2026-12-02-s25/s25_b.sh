set -x
tar -C .dev -xJf .dev/cache.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache
source .dev/env.sh
git log --oneline -1; git status --short | head
python3 .dev/s25/precompile_tests.py 16 2>&1 | tail -5 | tee $OUT/precompile.log
(cd packages/chord-kernels && timeout 420 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -25) | tee $OUT/gpu_kernels.log
(cd packages/chord-vllm && timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_core.py 2>&1 | tail -5) | tee $OUT/gpu_vllm.log
(cd packages/chord-bench && timeout 120 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -5) | tee $OUT/gpu_bench.log
