set -x
tar -C .dev -xJf .dev/cache37d.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache37d
source .dev/env.sh
git log --oneline -1; git status --short | head -8; date -u
(cd packages/chord-bench && timeout 100 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -1) | tee $OUT/gpu_bench.log
date -u
timeout 100 python3 .dev/s37/layer_gall.py time 2>&1 | tail -12
date -u
timeout 170 python3 -m chord_bench --quick --scenarios tp8_1024 ep8_tok43 --impls chord-indexed --peer humming-kernels --no-plot --max-minutes 3 --out $OUT/gemm 2>&1 | grep -v "^wrote" | tail -3
date -u
timeout 150 python3 -m chord_bench --quick --scenarios ep8_masked32 ep8_masked16 --impls chord-grouped --peer humming-kernels --no-plot --max-minutes 2 --out $OUT/grouped 2>&1 | grep -v "^wrote" | tail -3
date -u
