# Session 53 call a: every GEMM scenario with both routing draws (uniform, skewed), main's tree; six layer scenarios.
set -x
tar -C .dev -xJf .dev/cache48.tar.xz; tar -C .dev -xJf .dev/cache48b_extra.tar.xz; tar -C .dev -xJf .dev/s48/cache50_extra.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache48
source .dev/env.sh
date -u; nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
timeout 400 python3 -m chord_bench --draws uniform,skewed --rep-ms 10 --impls chord-indexed,chord-grouped --peer humming-kernels --no-plot --max-minutes 5.5 --out $OUT/bench_skew > $OUT/bench_skew.log 2>&1; echo bench rc=$?
date -u
timeout 120 python3 -m chord_bench.layer --rounds 9 --scenarios ep8_tok12 ep8_tok341 ep8_masked16 tp8_4096 tp8_12288 --out $OUT/layer_a > $OUT/layer_a.log 2>&1; echo layer rc=$?
date -u
ls $CHORD_CACHE_DIR | wc -l
tail -60 $OUT/bench_skew.log | cut -c1-220
tail -25 $OUT/layer_a.log | cut -c1-200
