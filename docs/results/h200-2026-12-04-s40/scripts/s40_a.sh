set -x
tar -C .dev -xJf .dev/cache40a.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache40
source .dev/env.sh
git log --oneline -1; git status --short | head -12; date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
(cd packages/chord-kernels && timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_indexed_gpu.py -k "split_tail or balanced or strided or wide or row_widths" 2>&1 | tail -4)
date -u
OUT=$OUT timeout 170 python3 .dev/s40/ab.py tail time 2>&1 | tail -16
date -u
OUT=$OUT timeout 150 python3 .dev/s40/layer_ab.py tail time 2>&1 | tail -16
date -u
mkdir -p $OUT/bench_plan $OUT/bench_tail
timeout 150 python3 -m chord_bench --quick --scenarios ep8_masked8 --impls chord-grouped --peer humming-kernels --no-plot --out $OUT/bench_plan 2>&1 | tail -3
timeout 150 python3 .dev/s40/bench_tail.py --quick --scenarios ep8_masked8 --impls chord-grouped --peer humming-kernels --no-plot --out $OUT/bench_tail 2>&1 | tail -3
date -u
