# Session 59 call f: the rest of the GPU files on the final rule (call e's wgmma run stopped at its limit after 104
# passes and no failure): test_indexed_wgmma_gpu.py whole on two workers, then test_subnormal_gpu.py.
set -x
export PYTHONPATH=$(pwd)/packages/chord-kernels/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache59 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
tar -C .dev -xJf .dev/s59e/cache59.tar.xz
date -u; nvidia-smi --query-gpu=name --format=csv,noheader
cd packages/chord-kernels
timeout 280 python3 -m pytest -q -m gpu -p no:cacheprovider -n 2 -rf tests/test_indexed_wgmma_gpu.py > $OUT/tests_wgmma.log 2>&1; echo wgmma tests rc=$?
grep -E "passed|failed|^FAILED" $OUT/tests_wgmma.log | cut -c1-200 | head -12
date -u
timeout 90 python3 -m pytest -q -m gpu -p no:cacheprovider -n 2 -rf tests/test_subnormal_gpu.py > $OUT/tests_subnormal.log 2>&1; echo subnormal rc=$?
grep -E "passed|failed|^FAILED" $OUT/tests_subnormal.log | cut -c1-200 | head -8
date -u
