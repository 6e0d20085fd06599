set -x
tar -C .dev -xJf .dev/cache35.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache35
source .dev/env.sh
git log --oneline -1; date -u
ROUNDS=7 OUT=$OUT timeout 100 python3 .dev/s35/ab.py gu16 time 2>&1 | tee $OUT/gu16_ab.log
ROUNDS=7 OUT=$OUT timeout 400 python3 .dev/s35/layer_rw.py time 2>&1 | tee $OUT/layer_rw.log
date -u
