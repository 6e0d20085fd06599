set -x
tar -C .dev -xJf .dev/cache.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache
source .dev/env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
python3 .dev/s26/blocks.py precompile 16 2>&1 | tail -2
python3 .dev/s26/blocks.py 2>&1 | tee $OUT/blocks.log
