# Session 59 call c: the K cut's part zeroes its accumulators with its first wgmma (kc == kc0) instead of
# 64-112 FSELs per item (ncu call b: ~1 % of the twin's stall samples). Split-tail GPU tests, then the A/B on the
# middle scenarios (ep8_tok16, ep8_tok43, ep8_masked32: short launches where the cut can pay) and session 58's set.
# Kernels precompiled on the CPU (.dev/s59c/cache59.tar.xz: the precompile set, the tests' and the contiguous twins).
set -x
export PYTHONPATH=$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache59
tar -C .dev -xJf .dev/s59c/cache59.tar.xz
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv
MIB=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1); W=3; [ "$MIB" -lt 100000 ] && W=2
(cd packages/chord-kernels && timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider -n $W -rf \
   tests/test_indexed_split_tail_gpu.py > $OUT/split_tail_tests.log 2>&1; echo tests rc=$?)
grep -E "passed|failed|^FAILED|^E  " $OUT/split_tail_tests.log | cut -c1-220 | head -12
date -u
timeout 300 python3 ci/split_tail_ab.py --scenarios ep8_tok16,ep8_tok43,ep8_masked32,ep8_tok341 \
   --contiguous ep8_contig128,ep8_contig256,ep8_contig512 --parts 4,8 --one-fma-only --out $OUT/ab > $OUT/ab.log 2>&1; echo ab rc=$?
date -u
grep -v "^$" $OUT/ab.log | cut -c1-330 | tail -30
