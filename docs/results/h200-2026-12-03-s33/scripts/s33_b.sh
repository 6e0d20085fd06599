set -x
tar -C .dev -xJf .dev/cache33.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache33
source .dev/env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
ROUNDS=7 OUT=$OUT timeout 130 python3 .dev/s33/ab.py cross time 2>&1 | tee $OUT/cross_ab.log
timeout 200 python3 -m chord_bench --quick --scenarios ep8_tok16 ep8_tok43 tp8_1024 --impls chord-indexed --peer humming-kernels --no-plot --max-minutes 3 --out $OUT/gemm 2>&1 | tail -8
timeout 190 python3 -m chord_bench --quick --scenarios ep8_masked8 ep8_masked16 ep8_masked32 ep8_masked64 --impls chord-grouped --peer humming-kernels --no-plot --max-minutes 3 --out $OUT/grouped 2>&1 | tail -8
