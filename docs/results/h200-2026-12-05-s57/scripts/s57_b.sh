# Session 57 call b: the grouped contiguous mode's pair of launches, its rule now one round trip of loads
# and its second launch a programmatic dependent launch; the block cut with the fused SiLU-and-mul in the
# plan. GPU tests (the grouped family; the contiguous split-tail cases), the pair's A/B (in plain stream
# order, each launch alone), the contiguous scenarios against humming-kernels 0.1.19 (wheel in .whl) on
# both draws, memcheck on the pair's test. Kernels precompiled on the CPU (.dev/s57/cache57.tar.xz).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
set -x
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache57
mkdir -p $CHORD_CACHE_DIR
[ -f .dev/s57/cache57.tar.xz ] && tar -C .dev -xJf .dev/s57/cache57.tar.xz
date -u; git log --oneline -1 2>/dev/null; nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
(cd packages/chord-kernels && timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider -n 3 -rf tests/test_grouped_gpu.py \
    tests/test_indexed_split_tail_gpu.py -k "not split_tail or contiguous" > $OUT/gpu_tests.log 2>&1; echo tests rc=$?)
grep -E "passed|failed|^FAILED|^E  " $OUT/gpu_tests.log | cut -c1-200 | tail -20
date -u
timeout 150 python3 ci/contiguous_pair_ab.py --seeds 0,1 --out $OUT/ab > $OUT/ab.log 2>&1; echo ab rc=$?
date -u
timeout 140 python3 -m chord_bench --scenarios ep32_contig128,ep8_contig128,ep8_tok128 --draws uniform,skewed --rep-ms 10 \
    --impls chord-grouped --peer humming-kernels --no-plot --max-minutes 2 --out $OUT/bench > $OUT/bench.log 2>&1; echo bench rc=$?
date -u
(cd packages/chord-kernels && timeout 100 compute-sanitizer --tool memcheck --report-api-errors no python3 -m pytest -q -m gpu \
    -p no:cacheprovider tests/test_grouped_gpu.py -k pair_runs > $OUT/memcheck.log 2>&1; echo memcheck rc=$?)
grep -E "ERROR SUMMARY|passed|failed" $OUT/memcheck.log | tail -3
date -u
cat $OUT/ab.log | grep -v "^$" | cut -c1-300 | tail -24
tail -9 $OUT/bench.log | cut -c1-220
