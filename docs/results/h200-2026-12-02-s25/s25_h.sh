set -x
tar -C .dev -xJf .dev/cache.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache
source .dev/env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
python3 .dev/s25/c4_down.py 2>&1 | tee $OUT/c4_down.log
cp .dev/cache/*four* $OUT/ 2>/dev/null; true
