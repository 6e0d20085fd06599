set -x
tar -C .dev -xJf .dev/cache39s.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache39s
source .dev/env.sh
git log --oneline -1; git status --short | head -8; date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
OUT=$OUT timeout 200 python3 .dev/s39/ab.py even time 2>&1 | tail -30
date -u
OUT=$OUT timeout 200 python3 .dev/s39/layer_ab.py even time 2>&1 | tail -24
date -u
OUT=$OUT timeout 150 python3 .dev/s39/layer_ab.py narrow time 2>&1 | tail -14
date -u
