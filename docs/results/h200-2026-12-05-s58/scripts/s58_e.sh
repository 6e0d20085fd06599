# Session 58 call e: what a second launch costs. The grouped contiguous mode's pair (session 57) against the
# chosen configuration alone, the pair's launches in the other order, and the chosen configuration followed by
# a one-CTA kernel (ci/contiguous_pair_ab.py). Session 57's kernels (.dev/s57/cache57.tar.xz; the tail pair of
# call d is reverted: scripts/tail_pair.patch).
set -x
export PYTHONPATH=$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache57
tar -C .dev -xJf .dev/s57/cache57.tar.xz
date -u; nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv
timeout 240 python3 ci/contiguous_pair_ab.py --seeds 0 --out $OUT/ab > $OUT/ab.log 2>&1; echo ab rc=$?
date -u
grep -v "^$" $OUT/ab.log | cut -c1-420 | tail -14
