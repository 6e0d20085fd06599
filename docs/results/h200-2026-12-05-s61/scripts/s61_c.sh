# Session 61 call c (prepared on the CPU: no GPU was lent in session 61). compact_scan.patch (the launch's item
# compaction scans its per-warp counts across a warp's lanes instead of looping over the warps: the four-warpgroup
# K-cut twins no longer spill) changes every WGMMA and decode kernel's code, so: the GPU suites as session 60's
# call b, then the GEMMs against humming-kernels 0.1.19 on every target scenario (compare with call a, run first
# in the same session on the same card, or re-run a and c back to back). Apply the patch to the tree before the
# call (`git apply docs/results/h200-2026-12-05-s61/scripts/compact_scan.patch`) and build the cache from it.
set -x
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache61c PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
tar -C .dev -xJf .dev/s61/cache61c.tar.xz
date -u; nvidia-smi --query-gpu=name --format=csv,noheader; git diff --stat | tail -1
grep -q "warps_run" packages/chord-kernels/src/chord_kernels/include/chord/indexed/scheduler.cuh || { echo "patch not applied"; exit 1; }
cd packages/chord-kernels
t() { local name=$1 lim=$2; shift 2; timeout $lim python3 -m pytest -q -m gpu -p no:cacheprovider -rf "$@" > $OUT/$name.log 2>&1
      echo "$name rc=$? $(grep -E '^[0-9]+ (passed|failed)|passed|failed' $OUT/$name.log | tail -1)"; grep -E "^FAILED" $OUT/$name.log | cut -c1-200 | head -5; }
t wgmma 200 -n 2 tests/test_indexed_wgmma_gpu.py
t split_silu 120 tests/test_indexed_split_tail_gpu.py tests/test_indexed_silu_mul_gpu.py
t indexed 120 tests/test_indexed_gpu.py tests/test_indexed_topk_sum_gpu.py
t grouped_routing 60 -n 2 tests/test_grouped_gpu.py tests/test_routing_gpu.py tests/test_dequant_gpu.py
cd ../..
timeout 150 python3 -m chord_bench --scenarios ep8_tok16 ep8_tok43 ep8_tok341 tp8_1024 tp8_8192 ep8_masked8 ep8_masked32 \
   ep8_contig256 --draws uniform --rep-ms 8 --impls chord-indexed,chord-grouped --peer humming-kernels --no-plot \
   --out $OUT/bench > $OUT/bench.log 2>&1; echo bench rc=$?
date -u
grep -E "^\| (ep8|tp8)_[a-z0-9]+\*? +\|" $OUT/bench/table.md | cut -c1-240 | tail -10
