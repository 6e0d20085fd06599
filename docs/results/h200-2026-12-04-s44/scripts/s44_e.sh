set -x
tar -C .dev -xJf .dev/cache44b.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache43
source .dev/env.sh
date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
for i in 1 2; do
timeout 200 python3 -m chord_bench --quick --scenarios ep8_masked8 ep8_masked16 ep8_decode --impls chord-indexed,chord-grouped --peer humming-kernels --no-plot --out $OUT/bench_e$i 2>&1 | tail -7
done
date -u
