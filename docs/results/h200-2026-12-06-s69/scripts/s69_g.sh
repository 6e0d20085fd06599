# Session 69 call g (the final rule, 5d79a78's tree: stream_out on TP8's down, K <= 256): the GPU tests of TP8's down
# kernels (with and without it, bit for bit), then chord_bench tp8_8192 against humming as time allows.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
mkdir -p .dev/cache69s; tar -C .dev/cache69s -xJf .dev/s69/cache69s.tar.xz; export CHORD_CACHE_DIR=$(pwd)/.dev/cache69s
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv,noheader
(cd packages/chord-kernels && timeout ${TT:-100} python3 -m pytest -q -m gpu -n 2 -p no:cacheprovider -rf tests/test_indexed_wgmma_gpu.py \
  tests/test_indexed_topk_sum_gpu.py -k "four_consumer_runs or runs_bit_identical or tp8" > $OUT/tests_g.log 2>&1; tail -3 $OUT/tests_g.log)
date -u
timeout ${BT:-80} python3 -m chord_bench --scenarios tp8_8192 --draws uniform --rep-ms 8 --max-minutes 1 \
   --impls chord-indexed --peer humming-kernels --no-plot --out $OUT/bench > $OUT/bench.log 2>&1; echo bench rc=$?
grep -E "^\| tp8_8192 +\|" $OUT/bench/table.md | cut -c1-220 | tail -4
date -u
