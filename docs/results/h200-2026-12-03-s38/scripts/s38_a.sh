set -x
tar -C .dev -xJf .dev/cache38a.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache38a
source .dev/env.sh
git log --oneline -1; git status --short | head -8; date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
OUT=$OUT timeout 150 python3 .dev/s38/ab.py runs time 2>&1 | tail -10
date -u
OUT=$OUT timeout 330 python3 .dev/s38/layer_ab.py runs time 2>&1 | tail -24
date -u
