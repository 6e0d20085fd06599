set -x
tar -C .dev -xJf .dev/cache32.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache32
source .dev/env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
.dev/s32/shift_exhaustive | tee $OUT/shift_exhaustive.log
.dev/s32/nibble4_exhaustive | tee $OUT/nibble4_exhaustive.log
ROUNDS=7 OUT=$OUT timeout 460 python3 .dev/s32/ab.py nib time 2>&1 | tee $OUT/nib_ab.log
