set -x
mkdir -p .dev/cache46 && tar -C .dev -xJf .dev/cache46.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache46
source .dev/env.sh
date -u
git log --oneline -1
timeout 150 python3 -m chord_bench --quick --scenarios 'ep8_*' 'tp8_*' --impls chord-indexed,chord-grouped --peer humming-kernels --no-plot --out $OUT/bench_c 2>&1 | tail -16 | cut -c1-250
date -u
