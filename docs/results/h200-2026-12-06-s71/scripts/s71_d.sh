# Session 71 call d: the plan with TP8's 32-token downs on the four-warpgroup runs (working tree): the indexed layer /
# routing-order / fused_moe and top-k-sum GPU files, then chord_bench's TP8 scenarios against humming.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
mkdir -p .dev/cache71; for a in cache cache_device cache_runs cache_dev2 cache_plan; do tar -C .dev/cache71 -xJf .dev/s71/$a.tar.xz; done
export CHORD_CACHE_DIR=$(pwd)/.dev/cache71
date -u; nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
(cd packages/chord-kernels && timeout ${TT:-150} python3 -m pytest -q -m gpu -p no:cacheprovider -rf -n 2 tests/test_indexed_gpu.py tests/test_indexed_topk_sum_gpu.py > $OUT/tests_d.log 2>&1
 echo "tests rc=$? $(tail -n 1 $OUT/tests_d.log)"; grep -E "^FAILED|^ERROR" $OUT/tests_d.log | cut -c1-200 | head -8)
date -u
timeout ${BT:-70} python3 -m chord_bench --scenarios tp8_1024 tp8_8192 ep8_tok16 --draws uniform --rep-ms 8 --max-minutes 1 --impls chord-indexed \
  --peer humming-kernels --no-plot --out $OUT/bench > $OUT/bench.log 2>&1; echo bench rc=$?; date -u
grep -E "^\| (ep8|tp8)_[a-z0-9]+\*? +\| uniform \| [0-9]" $OUT/bench/table.md | tr -s ' ' | cut -d'|' -f2,9-16
grep -E "tp8_1024 +\| uniform \| chord" $OUT/bench/table.md | cut -c1-200
