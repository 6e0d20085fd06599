set -x
tar -C .dev -xJf .dev/cache42e.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache42
source .dev/env.sh
date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
OUT=$OUT REGS=128,144 DRAWS=2 timeout 150 python3 .dev/s42/ab.py c3w time 2>&1 | tee $OUT/ab_c3w.log | tail -8
date -u
mkdir -p $OUT/bench $OUT/bench_grouped
timeout 150 python3 -m chord_bench --quick --scenarios ep8_tok16 ep8_tok43 --impls chord-indexed --peer humming-kernels --no-plot --out $OUT/bench 2>&1 | tail -5
timeout 150 python3 -m chord_bench --quick --scenarios ep8_masked16 ep8_masked32 --impls chord-grouped --peer humming-kernels --no-plot --out $OUT/bench_grouped 2>&1 | tail -5
date -u
