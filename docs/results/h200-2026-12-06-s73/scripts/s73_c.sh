# Session 73 call c (carry [".dev/s71", ".dev/s72", ".dev/s73", ".whl"]): the working tree on 6749ffe — TP8's four-warpgroup
# runs of four N tiles from the global counter (wgmma.RUN_FOUR_CONSUMER_TILES): (1) dyn_ab.py SET=c, the new plan against
# the strided runs of seven (str7: the plan before), dynamic runs of seven, strided runs of four, at 1024-12288 tokens;
# (2) every chord-kernels GPU file, two workers; chord-vllm core; (3) chord_bench tp8_1024 / tp8_8192 and the layer.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src:$(pwd)/packages/chord-vllm/src PYTHONUNBUFFERED=1
mkdir -p .dev/cache71; for a in s71/cache s71/cache_device s71/cache_runs s71/cache_dev2 s71/cache_plan s72/cache_device72 s73/cache73 s73/cache73c; do tar -C .dev/cache71 -xJf .dev/$a.tar.xz; done
export CHORD_CACHE_DIR=$(pwd)/.dev/cache71
date -u; nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
SET=c timeout ${AT:-150} python3 .dev/s73/dyn_ab.py time ${TOK:-8192,1024,4096,12288,2048,3072,1536,5120} 2>&1 | grep -v Warn | tee $OUT/dyn_ab.log
date -u
(cd packages/chord-kernels && timeout ${TT:-240} python3 -m pytest -q -m gpu -p no:cacheprovider -rf -n 2 --durations=5 tests/ > $OUT/tests.log 2>&1
 echo "kernels tests rc=$? $(tail -n 1 $OUT/tests.log)"; grep -E "^FAILED|^ERROR" $OUT/tests.log | cut -c1-200 | head -8)
(cd packages/chord-vllm && timeout 60 python3 -m pytest -q -m gpu -p no:cacheprovider -rf tests/test_core.py > $OUT/vllm.log 2>&1; echo "vllm rc=$? $(tail -n 1 $OUT/vllm.log)")
date -u
timeout ${BT:-70} python3 -m chord_bench --scenarios tp8_1024 tp8_8192 --draws uniform --rep-ms 8 --max-minutes 1 --impls chord-indexed \
  --peer humming-kernels --no-plot --out $OUT/bench > $OUT/bench.log 2>&1; echo bench rc=$?; date -u
grep -E "^\| (ep8|tp8)_[a-z0-9]+\*? +\| uniform \| [0-9]" $OUT/bench/table.md | tr -s ' ' | cut -d'|' -f2,4-11
timeout ${LT:-80} python3 -m chord_bench.layer --rounds 5 --draw uniform --scenarios tp8_8192 tp8_1024 --out $OUT/layer > $OUT/layer.log 2>&1; echo layer rc=$?
tail -n 4 $OUT/layer/layer.md 2>/dev/null | cut -c1-200 || tail -n 3 $OUT/layer.log
date -u
