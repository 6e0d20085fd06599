set -x
tar -C .dev -xJf .dev/cache29f.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache29f
source .dev/env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
python3 -m chord_bench --quick --scenarios ep8_tok43 --impls chord-indexed --peer humming-kernels --no-plot --max-minutes 3 --out $OUT/gemm 2>&1 | tail -14
python3 -m chord_bench --quick --scenarios ep8_masked32 --impls chord-grouped --peer humming-kernels --no-plot --max-minutes 2 --out $OUT/grouped 2>&1 | tail -10
python3 -m chord_bench.layer --rounds 9 --scenarios ep8_tok43 ep8_masked32 --out $OUT/layer 2>&1 | tail -14
