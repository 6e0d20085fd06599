# Session 48 call a (branch s48-c4-pairs): the 64 x 2 A/B against main, the bench and the TP8 layer.
set -x
tar -C .dev -xJf .dev/cache48.tar.xz; tar -C .dev -xJf .dev/cache48b_extra.tar.xz; tar -C .dev -xJf .dev/s48/cache50_extra.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache48
ls $CHORD_CACHE_DIR | wc -l
source .dev/env.sh
date -u; nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
OUT=$OUT ROUNDS=5 timeout 240 python3 .dev/s48/pairs_ab.py time 2>&1 | tee $OUT/pairs_ab_a.log
date -u
OUT=$OUT ROUNDS=5 timeout 120 python3 .dev/s48/stages_ab.py time 2>&1 | tee $OUT/stages_ab_a.log
date -u
timeout 150 python3 -m chord_bench --quick --scenarios 'tp8_*' --impls chord-indexed --peer humming-kernels --no-plot --out $OUT/bench_a > $OUT/bench_a.log 2>&1; echo bench rc=$?
date -u
timeout 180 python3 -m chord_bench.layer --rounds 9 --scenarios tp8_4096 tp8_5120 tp8_8192 tp8_12288 --out $OUT/layer_a > $OUT/layer_a.log 2>&1; echo layer rc=$?
date -u
grep -A12 -i "summary" $OUT/bench_a/table.md | head -20
tail -15 $OUT/layer_a.log
