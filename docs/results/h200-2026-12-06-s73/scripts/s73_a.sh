# Session 73 call a (carry [".dev/s71", ".dev/s72", ".whl"]): main 6749ffe — (1) every chord-kernels GPU file with two
# workers, chord-vllm core, chord-bench GPU; (2) chord_bench, every target scenario, against humming-kernels 0.1.19.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src:$(pwd)/packages/chord-vllm/src PYTHONUNBUFFERED=1
mkdir -p .dev/cache71; for a in s71/cache s71/cache_device s71/cache_runs s71/cache_dev2 s71/cache_plan s72/cache_device72; do tar -C .dev/cache71 -xJf .dev/$a.tar.xz; done
export CHORD_CACHE_DIR=$(pwd)/.dev/cache71; touch /tmp/marker
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw,power.limit --format=csv,noheader; git log --oneline -1 2>/dev/null
if [ -z "$NOTEST" ]; then
(cd packages/chord-kernels && timeout ${TT:-260} python3 -m pytest -q -m gpu -p no:cacheprovider -rf -n 2 --durations=5 tests/ > $OUT/tests.log 2>&1
 echo "kernels tests rc=$? $(tail -n 1 $OUT/tests.log)"; grep -E "^FAILED|^ERROR" $OUT/tests.log | cut -c1-200 | head -8)
(cd packages/chord-vllm && timeout 60 python3 -m pytest -q -m gpu -p no:cacheprovider -rf tests/test_core.py > $OUT/vllm.log 2>&1; echo "vllm rc=$? $(tail -n 1 $OUT/vllm.log)")
(cd packages/chord-bench && timeout 90 python3 -m pytest -q -m gpu -p no:cacheprovider -rf > $OUT/bench_tests.log 2>&1; echo "bench tests rc=$? $(tail -n 1 $OUT/bench_tests.log)")
fi
date -u
timeout ${BT:-130} python3 -m chord_bench --scenarios ep8_tok16 ep8_tok43 ep8_tok128 ep8_tok341 tp8_1024 tp8_8192 ep8_masked8 ep8_masked16 \
  ep8_masked32 ep8_masked64 ep8_contig256 ep8_contig512 --draws uniform --rep-ms 8 --max-minutes 1 --impls chord-indexed,chord-grouped \
  --peer humming-kernels --no-plot --out $OUT/bench > $OUT/bench.log 2>&1; echo bench rc=$?; date -u
grep -E "^\| (ep8|tp8)_[a-z0-9]+\*? +\| uniform \| [0-9]" $OUT/bench/table.md | tr -s ' ' | cut -d'|' -f2,6-16
