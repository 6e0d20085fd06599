set -x
export CHORD_CACHE_DIR=$(pwd)/.dev/cache27
source .dev/env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
python3 .dev/s27/reload_ab.py precompile 16 2>&1 | tail -2
python3 .dev/s27/reload_ab.py time 2>&1 | tee $OUT/reload_ab.log
