set -x
tar -C .dev -xJf .dev/cache.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache
source .dev/env.sh
python3 -m chord_bench.layer --rounds 9 --scenarios tp8_512 tp8_1024 ep8_tok12 ep8_masked16 ep8_masked32 --out $OUT/layer 2>&1 | tail -3
python3 -m chord_bench --quick --scenarios ep8_tok16 tp8_1024 --impls chord-indexed --peer humming-kernels --no-plot --max-minutes 3 --out $OUT/gemm 2>&1 | tail -3
python3 -m chord_bench --quick --scenarios ep8_masked16 ep8_masked32 --impls chord-grouped --peer humming-kernels --no-plot --max-minutes 2 --out $OUT/grouped 2>&1 | tail -3
cat $OUT/layer/layer.md; grep -A6 "best humming %" $OUT/gemm/table.md $OUT/grouped/table.md; grep "chord-\|humming" $OUT/gemm/table.md $OUT/grouped/table.md | cut -c1-150
