set -x
mkdir -p .dev/cache46r && tar -C .dev -xJf .dev/cache46r.tar.xz && tar -C .dev -xJf .dev/cache47x.tar.xz && cp -n .dev/cache47x/* .dev/cache46r/
export CHORD_CACHE_DIR=$(pwd)/.dev/cache46r
source .dev/env.sh
date -u
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv
OUT=$OUT timeout 400 python3 .dev/s47/c4_ab.py time all 2>&1 | tee $OUT/c4_ab_a.log
date -u
