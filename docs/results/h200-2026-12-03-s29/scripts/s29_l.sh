set -x
tar -C .dev -xJf .dev/cache29f.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache29f
source .dev/env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
python3 .dev/s29/ab.py decode precompile 16 2>&1 | tail -1
ROUNDS=9 timeout 240 python3 .dev/s29/ab.py decode time 2>&1 | tee $OUT/decode_ab.log
