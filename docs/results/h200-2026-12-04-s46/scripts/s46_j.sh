set -x
mkdir -p .dev/cache46 && tar -C .dev -xJf .dev/cache46.tar.xz && tar -C .dev -xJf .dev/cache46w16.tar.xz && tar -C .dev -xJf .dev/cache46idx.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache46
source .dev/env.sh
date -u
OUT=$OUT timeout 200 python3 .dev/s46/idx16.py ab 2>&1 | tee $OUT/idx16_ab_j.log
date -u
