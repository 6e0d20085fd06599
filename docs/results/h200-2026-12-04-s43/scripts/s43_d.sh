set -x
tar -C .dev -xJf .dev/cache43d.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache43
source .dev/env.sh
date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
OUT=$OUT DRAWS=2 timeout 500 python3 .dev/s43/contig_ab.py time 2>&1 | tee $OUT/contig_ab_d.log | tail -62
date -u
