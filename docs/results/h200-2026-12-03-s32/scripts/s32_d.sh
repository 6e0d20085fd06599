set -x
tar -C .dev -xJf .dev/cache32f.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache32f
source .dev/env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
timeout 230 python3 -m chord_bench.layer --rounds 9 --scenarios tp8_decode160 tp8_1024 ep8_tok12 ep8_tok43 ep8_masked8 ep8_masked16 ep8_masked32 --out $OUT/layer 2>&1 | tail -12
timeout 150 python3 -m chord_bench --quick --scenarios ep8_decode tp8_decode160 --impls chord-indexed --peer humming-kernels --no-plot --max-minutes 3 --out $OUT/gemm_decode 2>&1 | tail -5
timeout 170 python3 -m chord_bench --quick --scenarios ep8_contig128 ep8_contig256 ep8_contig512 --impls chord-grouped --peer humming-kernels --no-plot --max-minutes 3 --out $OUT/grouped_c 2>&1 | tail -6
