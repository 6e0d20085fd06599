set -x
tar -C .dev -xJf .dev/cache26.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache26
source .dev/env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
SKIP=ep8_tok8_gate_up/four3,ep8_tok8_down/four3 python3 .dev/s26/more.py 2>&1 | tee $OUT/more.log
