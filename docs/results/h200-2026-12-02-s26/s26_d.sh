set -x
tar -C .dev -xJf .dev/cache26.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache26
source .dev/env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
python3 .dev/s26/items2.py precompile 16 2>&1 | tail -2
python3 .dev/s26/items2.py 2>&1 | tee $OUT/items2.log
