# Session 70 call a: chord_bench on main 7b9c671 (stream_out on TP8's down) against humming-kernels 0.1.19, every target
# scenario; then the GPU tests of the WGMMA engine (whole file incl. the stream_out-off variant), CTA pairs, grouped.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
mkdir -p .dev/cache70; tar -C .dev/cache70 -xJf .dev/s70/cache.tar.xz; export CHORD_CACHE_DIR=$(pwd)/.dev/cache70; touch /tmp/cache_marker
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv,noheader
git log --oneline -1 2>/dev/null
timeout ${BT:-330} python3 -m chord_bench --scenarios ${SCEN:-ep8_tok16 ep8_tok43 ep8_tok128 ep8_tok341 tp8_1024 tp8_8192 ep8_masked8 \
   ep8_masked16 ep8_masked32 ep8_masked64 ep8_contig256 ep8_contig512} --draws uniform --rep-ms 8 --max-minutes ${BM:-5} \
   --impls chord-indexed,chord-grouped --peer humming-kernels --no-plot --out $OUT/bench > $OUT/bench.log 2>&1; echo bench rc=$?
date -u
(cd packages/chord-kernels && timeout ${TT:-200} python3 -m pytest -q -m gpu -p no:cacheprovider -rf -n 2 --durations=5 tests/test_indexed_wgmma_gpu.py tests/test_indexed_cta_pair_gpu.py tests/test_grouped_gpu.py > $OUT/tests.log 2>&1
 echo "tests rc=$? $(tail -n 1 $OUT/tests.log)"; grep -E "^FAILED|^ERROR" $OUT/tests.log | cut -c1-200 | head -8)
date -u
(cd .dev/cache70 && find . -type f -newer /tmp/cache_marker ! -name '*.lock' | tar -cJf $OUT/cache_device.tar.xz -T -); ls -la $OUT/cache_device.tar.xz
grep -E "^\| (ep8|tp8)_[a-z0-9]+\*? +\|" $OUT/bench/table.md | cut -c1-240 | tail -14
