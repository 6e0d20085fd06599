# Session 59 call a: session 58's kcut_uniform.patch applied (the K cut's part values broadcast from lane 0 so the
# wgmma descriptors stay uniform). The split-tail GPU tests, session 58 call f's A/B again (same scenarios), memcheck.
# Kernels precompiled on the CPU with the patch (.dev/s58u/cache58u.tar.xz).
set -x
export PYTHONPATH=$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache58u
tar -C .dev -xJf .dev/s58u/cache58u.tar.xz
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv
MIB=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1); W=3; [ "$MIB" -lt 100000 ] && W=2
(cd packages/chord-kernels && timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider -n $W -rf \
   tests/test_indexed_split_tail_gpu.py > $OUT/split_tail_tests.log 2>&1; echo tests rc=$?)
grep -E "passed|failed|^FAILED|^E  " $OUT/split_tail_tests.log | cut -c1-220 | head -12
date -u
timeout 220 python3 ci/split_tail_ab.py --scenarios ep8_tok341 --contiguous ep8_contig128,ep8_contig256,ep8_contig512 \
   --parts 4,8 --one-fma-only --out $OUT/ab > $OUT/ab.log 2>&1; echo ab rc=$?
date -u
(cd packages/chord-kernels && timeout 80 compute-sanitizer --tool memcheck --report-api-errors no python3 -m pytest -q -m gpu \
   -p no:cacheprovider tests/test_indexed_split_tail_gpu.py -k "m1 or every_item_cut" > $OUT/memcheck.log 2>&1; echo memcheck rc=$?)
grep -E "ERROR SUMMARY|passed|failed" $OUT/memcheck.log | tail -3
date -u
grep -v "^$" $OUT/ab.log | cut -c1-330 | tail -22
