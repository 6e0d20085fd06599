# Session 56 call a: session 55's split-tail GPU tests with the two test fixes (the launch's grid from
# routing_capacity; repeated contiguous runs compared on real rows), then ci/split_tail_ab.py (the plan against the K cut, 4 and 8 parts, and the block cut
# on every GEMM of the indexed scenarios, both draws, and the grouped contiguous scenarios).
set -x
export PYTHONPATH=$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache
mkdir -p $CHORD_CACHE_DIR
[ -f .dev/s56/cache56.tar.xz ] && tar -C .dev -xJf .dev/s56/cache56.tar.xz  # the A/B's 60 kernels, compiled on the CPU (nvcc 13.0)
date -u; nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
(cd packages/chord-kernels && timeout 100 python3 -m pytest -q -m gpu -p no:cacheprovider -n 4 tests/test_indexed_split_tail_gpu.py \
    > $OUT/gpu_tests.log 2>&1; echo tests rc=$?)
grep -E "passed|failed|^FAILED|^E  " $OUT/gpu_tests.log | cut -c1-200 | tail -30
date -u
# The grouped contiguous scenarios first (where the cuts apply most), then the indexed ones with a cut on seed 0.
timeout 200 python3 ci/split_tail_ab.py --scenarios "" --out $OUT/contiguous > $OUT/split_tail_ab_contiguous.log 2>&1; echo ab rc=$?
date -u
timeout 240 python3 ci/split_tail_ab.py --scenarios ep8_tok341,ep8_tok43,ep8_tok16,ep8_masked32 --contiguous "" \
    --out $OUT/indexed > $OUT/split_tail_ab_indexed.log 2>&1; echo ab rc=$?
date -u
grep -hv "^+" $OUT/split_tail_ab_contiguous.log $OUT/split_tail_ab_indexed.log | cut -c1-230 | tail -60
