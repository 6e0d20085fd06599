set -x
tar -C .dev -xJf .dev/cache43e.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache43
source .dev/env.sh
git log --oneline -1; git status --short | head -14; date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
timeout 330 python3 -m chord_bench --quick --scenarios ep8_tok128 ep8_tok341 ep8_contig128 --impls chord-indexed,chord-grouped --peer humming-kernels --no-plot --out $OUT/bench_f1 2>&1 | tail -8
date -u
timeout 200 python3 -m chord_bench --quick --scenarios ep8_tok128 --impls chord-indexed,chord-grouped --peer humming-kernels --no-plot --out $OUT/bench_f2 2>&1 | tail -5
date -u
