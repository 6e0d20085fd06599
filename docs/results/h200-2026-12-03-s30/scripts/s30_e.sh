set -x
tar -C .dev -xJf .dev/cache30c.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache30c
source .dev/env.sh
ROUNDS=7 OUT=$OUT timeout 400 python3 .dev/s30/ab.py imad time 2>&1 | tee $OUT/imad_ab.log
