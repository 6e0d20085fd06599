set -x
tar -C .dev -xJf .dev/cache_epi.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache_epi
source .dev/env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
python3 .dev/s26/epi.py 2>&1 | tee $OUT/epi.log
