set -x
tar -C .dev -xJf .dev/cache37a.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache37a
source .dev/env.sh
git log --oneline -1; git status --short | head -8; date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
timeout 200 python3 .dev/s37/ab.py rwg time 2>&1 | tail -14
date -u
timeout 330 python3 .dev/s37/layer_rwg.py time 2>&1 | tail -22
date -u
