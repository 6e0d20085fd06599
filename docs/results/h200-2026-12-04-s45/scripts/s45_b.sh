set -x
tar -C .dev -xJf .dev/cache44b.tar.xz
tar -C .dev -xJf .dev/cache45a_extra.tar.xz
tar -C .dev -xJf .dev/cache45b_extra.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache43
source .dev/env.sh
date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
python3 .dev/s45/mt1_ab.py precompile 16 2>&1 | tail -1
OUT=$OUT timeout 400 python3 .dev/s45/mt1_ab.py time 2>&1 | tee $OUT/mt1_ab_b.log
date -u
