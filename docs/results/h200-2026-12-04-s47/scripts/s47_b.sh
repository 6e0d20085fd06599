set -x
mkdir -p .dev/cache46r && tar -C .dev -xJf .dev/cache46r.tar.xz && tar -C .dev -xJf .dev/cache47y.tar.xz && cp -n .dev/cache47y/* .dev/cache46r/
export CHORD_CACHE_DIR=$(pwd)/.dev/cache46r
source .dev/env.sh
date -u
OUT=$OUT ROUNDS=5 timeout 500 python3 .dev/s47/runs4_ab.py time all 2>&1 | tee $OUT/runs4_ab_b.log
date -u
