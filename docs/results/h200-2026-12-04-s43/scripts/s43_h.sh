set -x
tar -C .dev -xJf .dev/cache43h.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache43
source .dev/env.sh
date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
OUT=$OUT timeout 400 python3 .dev/s43/idx_ab.py time 2>&1 | tee $OUT/idx_ab_h.log | tail -32
date -u
