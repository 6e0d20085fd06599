set -x
tar -C .dev -xJf .dev/cache36.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache36
source .dev/env.sh
git log --oneline -1; git status --short | head -5; date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv
timeout 170 python3 .dev/s36/ab.py so time 2>&1 | tail -12
date -u
OUT=$OUT timeout 120 python3 .dev/s36/ab.py gu16p time 2>&1 | tail -6
date -u
OUT=$OUT timeout 200 python3 .dev/s36/layer_so.py time 2>&1 | tail -12
date -u
