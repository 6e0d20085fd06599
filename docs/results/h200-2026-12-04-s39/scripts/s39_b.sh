set -x
tar -C .dev -xJf .dev/cache39t.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache39t
source .dev/env.sh
git log --oneline -1; git status --short | head -8; date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
OUT=$OUT timeout 120 python3 .dev/s39/ab.py tiles time 2>&1 | tail -10
date -u
mkdir -p $OUT/bench_indexed $OUT/bench_masked
timeout 200 python3 -m chord_bench --quick --scenarios ep8_tok16 ep8_tok43 tp8_1024 --impls chord-indexed --peer humming-kernels --no-plot --out $OUT/bench_indexed 2>&1 | tail -25
date -u
timeout 150 python3 -m chord_bench --quick --scenarios ep8_masked8 ep8_masked16 --impls chord-grouped --peer humming-kernels --no-plot --out $OUT/bench_masked 2>&1 | tail -20
date -u
