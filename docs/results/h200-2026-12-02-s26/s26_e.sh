set -x
tar -C .dev -xJf .dev/cache26.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache26
source .dev/env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
ROWS_PER_EXPERT=10,12,14,16 python3 .dev/s26/items2.py precompile 16 2>&1 | tail -2
ROWS_PER_EXPERT=10,12,14,16 python3 .dev/s26/items2.py 2>&1 | tee $OUT/items2b.log; cp $OUT/items2.json $OUT/items2b.json
