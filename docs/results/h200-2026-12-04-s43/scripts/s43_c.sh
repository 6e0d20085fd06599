set -x
tar -C .dev -xJf .dev/cache43c.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache43
source .dev/env.sh
date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
OUT=$OUT timeout 500 python3 .dev/s43/contig_ab.py time 2>&1 | tee $OUT/contig_ab_c.log | tail -20
date -u
