# Session 67 call g: the planned prefetch of the next stage's rows (WgmmaConfig.prefetch_rows) — interleaved
# against the same kernels without (prefetch_ab.py), its GPU tests and the two-stage gate_up items' tests, then
# chord_bench tp8_8192 (GEMMs) and the layer against humming-kernels 0.1.19. Kernels precompiled on the CPU.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache67g PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
mkdir -p .dev/cache67g; tar -C .dev/cache67g -xJf .dev/s67/cache67g.tar.xz
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv,noheader
timeout ${AT:-90} python3 .dev/s67/scripts/prefetch_ab.py time 2>&1 | grep -v Warning
date -u
(cd packages/chord-kernels && timeout ${TT:-120} python3 -m pytest -q -m gpu -p no:cacheprovider -rf -n 2 tests/test_indexed_wgmma_gpu.py \
   -k "${TK:-prefetched or bm96 or bm104 or bm80 or 64x2}" > $OUT/tests.log 2>&1
 echo "tests rc=$? $(tail -1 $OUT/tests.log)"; grep -E "^FAILED|^ERROR" $OUT/tests.log | cut -c1-200 | head -8)
date -u
timeout ${BT:-100} python3 -m chord_bench --scenarios ${SCEN:-tp8_8192} --draws uniform --rep-ms 8 --max-minutes 1 \
   --impls chord-indexed --peer humming-kernels --no-plot --out $OUT/bench > $OUT/bench.log 2>&1; echo bench rc=$?
grep -E "^\| (ep8|tp8)_[a-z0-9]+\*? +\|" $OUT/bench/table.md | cut -c1-220 | tail -4
date -u
timeout ${LT:-80} python3 -m chord_bench.layer --rounds 5 --draw uniform --scenarios ${LSCEN:-tp8_8192} --out $OUT/layer > $OUT/layer.log 2>&1; echo layer rc=$?
tail -6 $OUT/layer.log | cut -c1-200
date -u
