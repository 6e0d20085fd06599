set -x
tar -C .dev -xJf .dev/cache44b.tar.xz
tar -C .dev -xJf .dev/cache44c_extra.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache43
source .dev/env.sh
date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
OUT=$OUT timeout 300 python3 .dev/s44/ring_ab.py time 2>&1 | tee $OUT/ring_ab_g.log
date -u
