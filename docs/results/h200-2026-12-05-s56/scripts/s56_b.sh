# Session 56 call b: ci/split_tail_ab.py -- the plan against the K cut (4, 8 parts) and the block cut on
# every GEMM of the indexed scenarios (uniform and skewed), and the grouped contiguous scenarios.
set -x
export PYTHONPATH=$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache
mkdir -p $CHORD_CACHE_DIR
date -u; nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
timeout 560 python3 ci/split_tail_ab.py --out $OUT > $OUT/split_tail_ab.log 2>&1; echo ab rc=$?
date -u
grep -v "^+" $OUT/split_tail_ab.log | cut -c1-230 | tail -70
