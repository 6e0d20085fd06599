set -x
mkdir -p .dev/cache46 && tar -C .dev -xJf .dev/cache46.tar.xz && tar -C .dev -xJf .dev/cache46w16.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache46
source .dev/env.sh
date -u
timeout 120 python3 -m chord_bench --quick --scenarios ep8_tok128 ep8_tok341 ep8_contig128 ep8_contig256 --impls chord-indexed,chord-grouped --peer humming-kernels --no-plot --out $OUT/bench_i 2>&1 | tail -6 | cut -c1-250
date -u
