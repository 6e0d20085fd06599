# Session 52 call b3: every scenario side by side with humming on the branch tree (= main after the merge).
set -x
tar -C .dev -xJf .dev/cache48.tar.xz; tar -C .dev -xJf .dev/cache48b_extra.tar.xz; tar -C .dev -xJf .dev/s48/cache50_extra.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache48
source .dev/env.sh
date -u; nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
timeout 420 python3 -m chord_bench --quick --impls chord-indexed,chord-grouped --peer humming-kernels --no-plot --max-minutes 6 --out $OUT/bench_all > $OUT/bench_all.log 2>&1; echo bench rc=$?
date -u
timeout 120 python3 -m chord_bench.layer --rounds 9 --scenarios ep8_tok43 ep8_tok128 tp8_1024 tp8_8192 --out $OUT/layer_b3 > $OUT/layer_b3.log 2>&1; echo layer rc=$?
date -u
cat $OUT/bench_all/table.md | head -60
tail -12 $OUT/layer_b3.log
