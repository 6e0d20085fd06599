# Session 58 call f: the split tail's K cut with one epilogue per width (the last part sums the parts into its
# accumulators, then the same epilogue as an uncut item: the kernel's SASS 24.6k lines instead of 38.3k, the
# uncut kernels' SASS unchanged). The split-tail GPU tests, memcheck on two of them, and session 56's A/B
# (ci/split_tail_ab.py) on the contiguous scenarios and ep8_tok341. Kernels precompiled on the CPU
# (.dev/s58f/cache58f.tar.xz: the precompile set, the tests' and the A/B's split-tail kernels).
set -x
export PYTHONPATH=$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache58f
tar -C .dev -xJf .dev/s58f/cache58f.tar.xz
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv
MIB=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1); W=3; [ "$MIB" -lt 100000 ] && W=2
(cd packages/chord-kernels && timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider -n $W -rf \
   tests/test_indexed_split_tail_gpu.py > $OUT/split_tail_tests.log 2>&1; echo tests rc=$?)
grep -E "passed|failed|^FAILED|^E  " $OUT/split_tail_tests.log | cut -c1-220 | head -12
date -u
timeout 170 python3 ci/split_tail_ab.py --scenarios ep8_tok341 --contiguous ep8_contig128,ep8_contig256,ep8_contig512 \
   --parts 4,8 --one-fma-only --out $OUT/ab > $OUT/ab.log 2>&1; echo ab rc=$?
date -u
(cd packages/chord-kernels && timeout 70 compute-sanitizer --tool memcheck --report-api-errors no python3 -m pytest -q -m gpu \
   -p no:cacheprovider tests/test_indexed_split_tail_gpu.py -k "m1 or every_item_cut" > $OUT/memcheck.log 2>&1; echo memcheck rc=$?)
grep -E "ERROR SUMMARY|passed|failed" $OUT/memcheck.log | tail -3
date -u
grep -v "^$" $OUT/ab.log | cut -c1-330 | tail -22
