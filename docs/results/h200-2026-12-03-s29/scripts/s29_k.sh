set -x
tar -C .dev -xJf .dev/cache29f.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache29f
source .dev/env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
timeout 250 python3 -m chord_bench --quick --scenarios ep8_tok16 tp8_1024 --impls chord-indexed --peer humming-kernels --no-plot --max-minutes 3 --out $OUT/gemm 2>&1 | tail -8
timeout 150 python3 -m chord_bench.layer --rounds 9 --scenarios tp8_1024 ep8_tok12 --out $OUT/layer 2>&1 | tail -6
