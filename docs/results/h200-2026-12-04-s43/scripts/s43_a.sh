set -x
tar -C .dev -xJf .dev/cache43a.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache43
source .dev/env.sh
git log --oneline -1; git status --short | head -12; date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
OUT=$OUT DRAWS=2 timeout 330 python3 .dev/s43/ab.py mt3 time 2>&1 | tee $OUT/mt3_ab_a.log | tail -16
date -u
OUT=$OUT timeout 240 python3 .dev/s43/layer_ab.py mt3 time 2>&1 | tee $OUT/layer_mt3_a.log | tail -16
date -u
