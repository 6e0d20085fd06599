set -x
tar -C .dev -xJf .dev/cache30d.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache30d
source .dev/env.sh
ROUNDS=7 OUT=$OUT timeout 400 python3 .dev/s30/ab.py four2 time 2>&1 | tee $OUT/four2_ab.log
