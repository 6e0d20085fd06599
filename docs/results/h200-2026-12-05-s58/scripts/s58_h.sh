# Prepared in session 58 for the next session (not run: the device time was spent). scripts/kcut_uniform.patch applied (the K cut's
# part values broadcast from lane 0). The split-tail GPU tests, then as much of the A/B as the time allows.
# Kernels precompiled on the CPU with the patch (.dev/s58u/cache58u.tar.xz).
export PYTHONPATH=$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache58u
tar -C .dev -xJf .dev/s58u/cache58u.tar.xz
nvidia-smi --query-gpu=name --format=csv,noheader
MIB=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1); W=3; [ "$MIB" -lt 100000 ] && W=2
(cd packages/chord-kernels && timeout 40 python3 -m pytest -q -m gpu -p no:cacheprovider -n $W -rf \
   tests/test_indexed_split_tail_gpu.py > $OUT/split_tail_tests.log 2>&1; echo tests rc=$?)
grep -E "passed|failed|^FAILED|^E  " $OUT/split_tail_tests.log | cut -c1-200 | head -8
timeout 60 python3 ci/split_tail_ab.py --scenarios ep8_tok341 --contiguous ep8_contig512 --draws uniform --parts 4 \
   --one-fma-only --out $OUT/ab > $OUT/ab.log 2>&1; echo ab rc=$?
grep -v "^$" $OUT/ab.log | cut -c1-300 | tail -5
