set -x
tar -C .dev -xJf .dev/cache30.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache30
source .dev/env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
.dev/s30/subnormal_exhaustive | tee $OUT/subnormal_exhaustive.log
ROUNDS=7 OUT=$OUT timeout 420 python3 .dev/s30/ab.py sub time 2>&1 | tee $OUT/sub_ab.log
