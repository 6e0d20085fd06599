set -x
tar -C .dev -xJf .dev/cache34.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache34
source .dev/env.sh
git log --oneline -1; date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
ROUNDS=7 OUT=$OUT timeout 400 python3 .dev/s34/layer_blk.py c time 2>&1 | tee $OUT/layer_blk3.log

date -u
