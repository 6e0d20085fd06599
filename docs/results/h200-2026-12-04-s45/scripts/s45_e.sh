set -x
mkdir -p .dev/cache45 && tar -C .dev -xJf .dev/cache45.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache45
source .dev/env.sh
date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
timeout 500 python3 -m chord_bench --quick --scenarios ep8_* tp8_* --impls chord-indexed,chord-grouped --peer humming-kernels --no-plot --out $OUT/bench_e 2>&1 | tail -24
date -u
ls .dev/cache45/*.cubin | wc -l
