# Session 55 call a: the split tail's GPU tests (both cuts, the contiguous mode, graph replays), then
# compute-sanitizer memcheck and racecheck on the small cut shapes.
set -x
export PYTHONPATH=$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache
mkdir -p $CHORD_CACHE_DIR
date -u; git log --oneline -1 2>/dev/null; nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
cd packages/chord-kernels
timeout 330 python3 -m pytest -q -m gpu -p no:cacheprovider -n 8 tests/test_indexed_split_tail_gpu.py \
    tests/test_indexed_wgmma_gpu.py tests/test_grouped_gpu.py -k "tail or pairs or four or items2 or rows or contiguous" \
    > $OUT/gpu_tests.log 2>&1; echo tests rc=$?
tail -30 $OUT/gpu_tests.log
date -u
for tool in memcheck racecheck; do
  timeout 110 compute-sanitizer --tool $tool --error-exitcode 1 python3 -m pytest -q -m gpu -p no:cacheprovider \
      tests/test_indexed_split_tail_gpu.py -k "m1 or every_item_cut" > $OUT/sanitizer_$tool.log 2>&1; echo $tool rc=$?
  tail -5 $OUT/sanitizer_$tool.log
done
date -u
