# Session 58 call d: the tail pair (WgmmaConfig.tail_pair: the whole rounds on the uncut kernel, the last
# round cut along K by a second launch). Its GPU tests, a smoke run of the grouped and indexed GPU tests
# (every kernel's argument struct gained two fields), then the A/B against the plan on the grouped contiguous
# scenarios. Kernels precompiled on the CPU (.dev/s58/cache58.tar.xz: the precompile set plus the pairs').
set -x
export PYTHONPATH=$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache58
tar -C .dev -xJf .dev/s58/cache58.tar.xz
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv
MIB=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1); W=3; [ "$MIB" -lt 100000 ] && W=2
(cd packages/chord-kernels && timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider -n $W -rf tests/test_indexed_split_tail_gpu.py \
   -k "pair" > $OUT/pair_tests.log 2>&1; echo pair tests rc=$?)
grep -E "passed|failed|^FAILED|^E  " $OUT/pair_tests.log | cut -c1-220 | head -20
date -u
timeout 200 python3 ci/tail_pair_ab.py --indexed "" --out $OUT/ab > $OUT/ab.log 2>&1; echo ab rc=$?
date -u
(cd packages/chord-kernels && timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider -n $W -rf tests/test_grouped_gpu.py \
   tests/test_indexed_gpu.py > $OUT/smoke_tests.log 2>&1; echo smoke rc=$?)
grep -E "passed|failed|^FAILED" $OUT/smoke_tests.log | cut -c1-200 | tail -12
date -u
grep -v "^$" $OUT/ab.log | cut -c1-250 | tail -16
