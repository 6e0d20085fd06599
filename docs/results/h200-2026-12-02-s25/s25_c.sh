set -x
tar -C .dev -xJf .dev/cache.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache
source .dev/env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
python3 -m chord_bench.layer --rounds 9 --scenarios tp8_512 tp8_1024 ep8_tok12 ep8_masked16 ep8_tok43 --out $OUT/layer 2>&1 | tail -15
python3 -m chord_bench --quick --scenarios ep8_tok16 tp8_1024 --impls chord-indexed --peer humming-kernels --no-plot --max-minutes 3 --out $OUT/gemm 2>&1 | tail -25
python3 -m chord_bench --quick --scenarios ep8_masked16 --impls chord-grouped --peer humming-kernels --no-plot --max-minutes 2 --out $OUT/grouped 2>&1 | tail -15
cat $OUT/layer/layer.md $OUT/gemm/table.md $OUT/grouped/table.md 2>/dev/null | head -80
