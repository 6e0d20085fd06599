set -x
tar -C .dev -xJf .dev/cache33.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache33
source .dev/env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
timeout 260 python3 -m chord_bench.layer --rounds 9 --scenarios tp8_decode160 tp8_1024 ep8_tok12 ep8_tok43 ep8_masked8 ep8_masked16 ep8_masked32 --out $OUT/layer 2>&1 | tail -12
