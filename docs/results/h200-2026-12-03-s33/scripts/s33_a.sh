set -x
tar -C .dev -xJf .dev/cache33.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache33
source .dev/env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
.dev/s33/dequant_exhaustive | tee $OUT/dequant_exhaustive.log
ROUNDS=7 OUT=$OUT timeout 480 python3 .dev/s33/ab.py bias time 2>&1 | tee $OUT/bias_ab.log
