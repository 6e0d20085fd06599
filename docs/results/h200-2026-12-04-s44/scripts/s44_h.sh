set -x
tar -C .dev -xJf .dev/cache44b.tar.xz
tar -C .dev -xJf .dev/cache44d_extra.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache43
source .dev/env.sh
date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
OUT=$OUT timeout 200 python3 .dev/s44/runs_ab.py time 2>&1 | tee $OUT/runs_ab_h.log
date -u
