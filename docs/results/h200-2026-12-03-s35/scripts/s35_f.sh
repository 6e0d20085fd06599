set -x
tar -C .dev -xJf .dev/cache35.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache35
source .dev/env.sh
git log --oneline -1; date -u
(cd packages/chord-kernels && timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_indexed_topk_sum_gpu.py tests/test_grouped_gpu.py 2>&1 | tail -3) | tee $OUT/topk_grouped_gpu.log
ROUNDS=7 OUT=$OUT timeout 150 python3 .dev/s35/layer_rw.py time final 2>&1 | tee $OUT/layer_rw_final.log
date -u
timeout 150 python3 -m chord_bench --quick --scenarios ep8_masked8 ep8_masked16 --impls chord-grouped --peer humming-kernels --no-plot --max-minutes 2 --out $OUT/gemm 2>&1 | tail -14
date -u
timeout 150 python3 -m chord_bench.layer --rounds 9 --scenarios ep8_tok5 ep8_tok8 ep8_masked8 --out $OUT/layer 2>&1 | grep -v "^wrote" | tail -9
date -u
