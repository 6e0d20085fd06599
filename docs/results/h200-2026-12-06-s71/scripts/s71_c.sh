# Session 71 call c: (1) runs_ab.py — TP8's one-block 24/32-token downs, decode kernel (plan) against the WGMMA runs on
# four consumer warpgroups with streamed output; (2) the whole chord-kernels GPU suite with two workers on the leaner
# pack_int4 / dequantize (a868caa, 8e8955e); chord-vllm and chord-bench GPU tests; (3) chord_bench, every target.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src:$(pwd)/packages/chord-vllm/src PYTHONUNBUFFERED=1
mkdir -p .dev/cache71; for a in cache cache_device cache_runs; do tar -C .dev/cache71 -xJf .dev/s71/$a.tar.xz; done
export CHORD_CACHE_DIR=$(pwd)/.dev/cache71
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw,power.limit --format=csv,noheader; git log --oneline -1 2>/dev/null
timeout ${AT:-120} python3 .dev/s71/runs_ab.py time ${TOK:-1024,896,1152,768,512} > $OUT/runs_ab.log 2>&1; echo ab rc=$?
date -u
(cd packages/chord-kernels && timeout ${TT:-220} python3 -m pytest -q -m gpu -p no:cacheprovider -rf -n 2 --durations=5 tests/ > $OUT/tests.log 2>&1
 echo "kernels tests rc=$? $(tail -n 1 $OUT/tests.log)"; grep -E "^FAILED|^ERROR" $OUT/tests.log | cut -c1-200 | head -8)
date -u
(cd packages/chord-vllm && timeout 40 python3 -m pytest -q -m gpu -p no:cacheprovider -rf tests/test_core.py > $OUT/vllm.log 2>&1; echo "vllm rc=$? $(tail -n 1 $OUT/vllm.log)")
(cd packages/chord-bench && timeout 40 python3 -m pytest -q -m gpu -p no:cacheprovider -rf > $OUT/bench_tests.log 2>&1; echo "bench tests rc=$? $(tail -n 1 $OUT/bench_tests.log)")
date -u
timeout ${BT:-80} python3 -m chord_bench --scenarios ep8_tok16 ep8_tok43 ep8_tok128 ep8_tok341 tp8_1024 tp8_8192 ep8_masked8 ep8_masked16 \
  ep8_masked32 ep8_masked64 ep8_contig256 ep8_contig512 --draws uniform --rep-ms 8 --max-minutes 1 --impls chord-indexed,chord-grouped \
  --peer humming-kernels --no-plot --out $OUT/bench > $OUT/bench.log 2>&1; echo bench rc=$?; date -u
grep -v Warning $OUT/runs_ab.log | tail -n 12
grep -E "^\| (ep8|tp8)_[a-z0-9]+\*? +\| uniform \| [0-9]" $OUT/bench/table.md | tr -s ' ' | cut -d'|' -f2,9-16
