set -x
mkdir -p .dev/cache46 && tar -C .dev -xJf .dev/cache46.tar.xz && tar -C .dev -xJf .dev/cache46w16.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache46
source .dev/env.sh
date -u
POINTS=121,128,135,138,140,142,145,150 DRAWS=2 SILU=1 OUT=$OUT timeout 400 python3 .dev/s46/w16.py ab w16_8_9_10 2>&1 | tee $OUT/w16_ab_e.log
date -u
