set -x
tar -C .dev -xJf .dev/cache42b.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache42
source .dev/env.sh
git status --short | head -12; date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
OUT=$OUT DRAWS=3 timeout 200 python3 .dev/s42/ab.py c3 time 2>&1 | tee $OUT/ab.log | tail -16
date -u
OUT=$OUT timeout 200 python3 .dev/s42/layer_ab.py c3 time 2>&1 | tee $OUT/layer.log | tail -16
date -u
mkdir -p $OUT/bench_plan $OUT/bench_c3
timeout 150 python3 -m chord_bench --quick --scenarios ep8_tok16 --impls chord-indexed --peer humming-kernels --no-plot --out $OUT/bench_plan 2>&1 | tail -4
timeout 150 python3 .dev/s42/bench_c3.py --quick --scenarios ep8_tok16 --impls chord-indexed --peer humming-kernels --no-plot --out $OUT/bench_c3 2>&1 | tail -4
timeout 150 python3 -m chord_bench --quick --scenarios ep8_masked16 --impls chord-grouped --peer humming-kernels --no-plot --out $OUT/bench_plan 2>&1 | tail -4
timeout 150 python3 .dev/s42/bench_c3.py --quick --scenarios ep8_masked16 --impls chord-grouped --peer humming-kernels --no-plot --out $OUT/bench_c3 2>&1 | tail -4
date -u
