# Session 63 call c: the GPU tests over the kernels the 96/104-token gate_up plan changes (whole stages, pairs
# shifted), on the committed tree: test_indexed_wgmma_gpu.py (bit for bit against the per-step loop, the reference),
# test_subnormal_gpu.py, the fused SiLU. Two workers (H100 memory). Kernels: cache63 + cache63b.
export PYTHONPATH=$(pwd)/packages/chord-kernels/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache63 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
tar -C .dev -xJf .dev/s63/cache63.tar.xz; tar -C .dev/cache63 -xJf .dev/s63/cache63b.tar.xz
date -u; nvidia-smi --query-gpu=name --format=csv,noheader; git log --oneline -1
cd packages/chord-kernels
timeout ${T:-230} python3 -m pytest -q -m gpu -p no:cacheprovider -rf -n 2 tests/test_indexed_wgmma_gpu.py \
  tests/test_subnormal_gpu.py tests/test_indexed_silu_mul_gpu.py > $OUT/tests.log 2>&1
echo tests rc=$? $(tail -1 $OUT/tests.log); grep -E "^FAILED|^ERROR" $OUT/tests.log | cut -c1-200 | head -8
date -u
