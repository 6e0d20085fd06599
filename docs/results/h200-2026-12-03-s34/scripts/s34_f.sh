set -x
tar -C .dev -xJf .dev/cache34.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache34
source .dev/env.sh
date -u
ROUNDS=7 OUT=$OUT timeout 200 python3 .dev/s34/layer_blk.py f time 2>&1 | tee $OUT/layer_blk4.log

ROUNDS=7 OUT=$OUT timeout 100 python3 .dev/s34/masked_blk.py f time 2>&1 | tee $OUT/masked_blk2.log
date -u
