set -x
tar -C .dev -xJf .dev/cache44b.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache43
source .dev/env.sh
date -u
(cd packages/chord-kernels && timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_indexed_gpu.py tests/test_empty_batches.py 2>&1 | tail -1) | tee $OUT/gpu_kernels_i.log
(cd packages/chord-bench && timeout 100 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -1) | tee $OUT/gpu_bench_i.log
(cd packages/chord-vllm && timeout 80 python3 -m pytest -q -p no:cacheprovider tests/test_core.py 2>&1 | tail -1) | tee $OUT/gpu_vllm_i.log
date -u
