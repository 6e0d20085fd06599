set -x
mkdir -p .dev/cache46 && tar -C .dev -xJf .dev/cache46.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache46
source .dev/env.sh
date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
(cd packages/chord-kernels && timeout 150 python3 -m pytest -m gpu -q -x -p no:cacheprovider tests/test_grouped_gpu.py 2>&1 | tail -3) | tee $OUT/gpu_grouped_a.log
OUT=$OUT timeout 120 python3 .dev/s46/route_wide_ab.py 2>&1 | tee $OUT/route_wide_ab_a.log
date -u
timeout 150 python3 -m chord_bench --quick --scenarios 'ep8_*' 'tp8_*' --impls chord-indexed,chord-grouped --peer humming-kernels --no-plot --out $OUT/bench_a 2>&1 | tail -18 | cut -c1-250
date -u
