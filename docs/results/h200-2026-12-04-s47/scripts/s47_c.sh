set -x
mkdir -p .dev/cache47 && tar -C .dev -xJf .dev/cache46r.tar.xz && mv .dev/cache46r/* .dev/cache47/ && tar -C .dev -xJf .dev/cache47c_extra.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache47
ls $CHORD_CACHE_DIR | wc -l
source .dev/env.sh
date -u
OUT=$OUT ROUNDS=5 timeout 200 python3 .dev/s47/final_ab.py time 2>&1 | tee $OUT/final_ab_c.log
date -u
timeout 150 python3 -m chord_bench --quick --scenarios 'tp8_*' --impls chord-indexed --peer humming-kernels --no-plot --out $OUT/bench_c > $OUT/bench_c.log 2>&1; echo bench rc=$?
date -u
timeout 180 python3 -m chord_bench.layer --rounds 9 --scenarios tp8_2304 tp8_4096 tp8_8192 --out $OUT/layer_c > $OUT/layer_c.log 2>&1; echo layer rc=$?
date -u
grep -A12 -i "summary" $OUT/bench_c/table.md | head -20
tail -15 $OUT/layer_c.log
