set -x
tar -C .dev -xJf .dev/cache42a.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache42
source .dev/env.sh
git log --oneline -1; git status --short | head -12; date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
OUT=$OUT REGS=128,144,152 timeout 280 python3 .dev/s42/ab.py c3 time 2>&1 | tee $OUT/ab.log | tail -16
date -u
OUT=$OUT timeout 250 python3 .dev/s42/layer_ab.py c3 time 2>&1 | tee $OUT/layer.log | tail -16
date -u
