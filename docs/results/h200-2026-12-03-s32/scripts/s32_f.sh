set -x
tar -C .dev -xJf .dev/cache32f.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache32f
source .dev/env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
ROUNDS=7 OUT=$OUT timeout 300 python3 .dev/s32/ab.py two time 2>&1 | tee $OUT/two_ab.log
