set -x
tar -C .dev -xJf .dev/cache42e.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache42
source .dev/env.sh
date -u
CONSUMERS=2 timeout 200 compute-sanitizer --tool racecheck python3 .dev/s42/sanitize_three.py > $OUT/racecheck_two_full.log 2>&1; grep -c 'Race reported' $OUT/racecheck_two_full.log; grep 'wgmma.cuh\|ptx.cuh\|epilogue.cuh\|topk_sum.cuh' $OUT/racecheck_two_full.log | sed 's/.*in \([a-z_]*\.cuh:[0-9]*\).*/\1/' | sort | uniq -c; grep -v "Host Frame" $OUT/racecheck_two_full.log | grep "Race reported\|Write access" | head -4; tail -2 $OUT/racecheck_two_full.log
date -u
