set -x
tar -C .dev -xJf .dev/cache34.tar.xz
tar -C .dev -xJf .dev/cache34h.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache34
source .dev/env.sh
date -u
ROUNDS=7 OUT=$OUT timeout 300 python3 .dev/s34/layer_blk.py h time 2>&1 | tee $OUT/layer_blk5.log
date -u
