set -x
tar -C .dev -xJf .dev/cache32f.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache32f
source .dev/env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
timeout 230 python3 -m chord_bench --quick --scenarios ep8_tok16 ep8_tok43 tp8_1024 --impls chord-indexed --peer humming-kernels --no-plot --max-minutes 3 --out $OUT/gemm 2>&1 | tail -8
timeout 200 python3 -m chord_bench --quick --scenarios ep8_masked8 ep8_masked16 ep8_masked32 ep8_masked64 --impls chord-grouped --peer humming-kernels --no-plot --max-minutes 3 --out $OUT/grouped 2>&1 | tail -8
timeout 170 python3 -m chord_bench --quick --scenarios ep8_tok128 ep8_tok341 tp8_8192 --impls chord-indexed --peer humming-kernels --no-plot --max-minutes 3 --out $OUT/gemm_prefill 2>&1 | tail -6
