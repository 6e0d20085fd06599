# Session 66 call c: the GPU suites on the final tree — the CTA pairs' tests, then the WGMMA kernel's and the grouped
# family's whole files (one pytest run, two workers; kernels the cache lacks compile on the device).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache66t PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
mkdir -p .dev/cache66t; for f in .dev/s66/cache*.tar.xz; do tar -C .dev/cache66t -xJf $f; done
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv,noheader
cd packages/chord-kernels
timeout ${T:-400} python3 -m pytest -q -m gpu -p no:cacheprovider -rf -n 2 tests/test_indexed_cta_pair_gpu.py \
  tests/test_indexed_wgmma_gpu.py tests/test_grouped_gpu.py > $OUT/tests.log 2>&1
echo "tests rc=$? $(tail -1 $OUT/tests.log)"; grep -E "^FAILED|^ERROR" $OUT/tests.log | cut -c1-200 | head -12
grep -E "^[.FEsx]+ +\[ *[0-9]+%\]" $OUT/tests.log | tail -2
date -u
