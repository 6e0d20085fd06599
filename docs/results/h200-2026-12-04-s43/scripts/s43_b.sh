set -x
tar -C .dev -xJf .dev/cache43b.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache43
source .dev/env.sh
git log --oneline -1; git status --short | head -12; date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
timeout 400 python3 -m chord_bench --quick --scenarios ep8_tok128 ep8_tok341 --impls chord-indexed,chord-grouped --peer humming-kernels --no-plot --out $OUT/bench_b 2>&1 | tail -30
date -u
