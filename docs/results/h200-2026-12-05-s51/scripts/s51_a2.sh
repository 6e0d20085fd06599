# Session 51: call a's two A/B scripts again (the first run hit a type check since reverted).
set -x
tar -C .dev -xJf .dev/cache48.tar.xz; tar -C .dev -xJf .dev/cache48b_extra.tar.xz; tar -C .dev -xJf .dev/s48/cache50_extra.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache48
source .dev/env.sh
date -u; nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
OUT=$OUT ROUNDS=5 timeout 240 python3 .dev/s48/pairs_ab.py time 2>&1 | tee $OUT/pairs_ab_a.log
date -u
OUT=$OUT ROUNDS=5 timeout 120 python3 .dev/s48/stages_ab.py time 2>&1 | tee $OUT/stages_ab_a.log
date -u
