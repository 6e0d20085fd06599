# Session 56 call a: session 55's split-tail GPU tests with the two test fixes (the launch's grid from
# routing_capacity; repeated runs compared on real rows), the tests -n 8 ran out of memory on, then
# compute-sanitizer memcheck (kernel errors only) and racecheck on both cuts' smallest shapes.
set -x
export PYTHONPATH=$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache
mkdir -p $CHORD_CACHE_DIR
date -u; nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
cd packages/chord-kernels
timeout 240 python3 -m pytest -q -m gpu -p no:cacheprovider -n 4 tests/test_indexed_split_tail_gpu.py \
    tests/test_indexed_wgmma_gpu.py tests/test_grouped_gpu.py -k "tail or pairs or four or items2 or rows or contiguous" \
    > $OUT/gpu_tests.log 2>&1; echo tests rc=$?
grep -E "passed|failed|^FAILED|^E  " $OUT/gpu_tests.log | cut -c1-200 | tail -30
date -u
timeout 90 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 1 python3 -m pytest -q -m gpu \
    -p no:cacheprovider tests/test_indexed_split_tail_gpu.py -k "m1 or every_item_cut or blocks_four" \
    > $OUT/sanitizer_memcheck.log 2>&1; echo memcheck rc=$?
tail -4 $OUT/sanitizer_memcheck.log
timeout 100 compute-sanitizer --tool racecheck --error-exitcode 1 python3 -m pytest -q -m gpu -p no:cacheprovider \
    tests/test_indexed_split_tail_gpu.py -k "m1 or blocks_four" > $OUT/sanitizer_racecheck.log 2>&1; echo racecheck rc=$?
grep -c "Error: Race" $OUT/sanitizer_racecheck.log; grep "Error: Race" $OUT/sanitizer_racecheck.log | sort | uniq -c | cut -c1-200
tail -4 $OUT/sanitizer_racecheck.log
date -u
