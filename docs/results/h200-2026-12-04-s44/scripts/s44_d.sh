set -x
tar -C .dev -xJf .dev/cache44b.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache43
source .dev/env.sh
git status --short | head; date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
timeout 500 python3 -m chord_bench --quick --scenarios ep8_* tp8_* --impls chord-indexed,chord-grouped --peer humming-kernels --no-plot --out $OUT/bench_d 2>&1 | tail -20
date -u
