# Session 55 call c: the A/B on uniform draws whose downs are cut (seed 2).
set -x
export PYTHONPATH=$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache
mkdir -p $CHORD_CACHE_DIR
date -u; nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
timeout 300 python3 ci/split_tail_ab.py --seed 2 --draws uniform --scenarios ep8_tok16,ep8_masked16,ep8_tok43 \
    --contiguous "" --out $OUT/seed2 > $OUT/split_tail_ab_seed2.log 2>&1; echo ab rc=$?
date -u
cut -c1-230 $OUT/split_tail_ab_seed2.log | tail -30
