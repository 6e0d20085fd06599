set -x
tar -C .dev -xJf .dev/cache30b.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache30b
source .dev/env.sh
timeout 200 python3 -m chord_bench --quick --scenarios ep8_decode tp8_decode160 --impls chord-indexed --peer humming-kernels --no-plot --max-minutes 3 --out $OUT/gemm_decode 2>&1 | tail -5
timeout 200 python3 -m chord_bench --quick --scenarios ep8_contig512 --impls chord-grouped --peer humming-kernels --no-plot --max-minutes 3 --out $OUT/grouped_c 2>&1 | tail -4
