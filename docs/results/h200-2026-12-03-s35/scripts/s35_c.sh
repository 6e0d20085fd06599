set -x
tar -C .dev -xJf .dev/cache35.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache35
source .dev/env.sh
git log --oneline -1; date -u
(cd packages/chord-kernels && timeout 120 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_indexed_gpu.py -k "row_widths or tp8_down or wide_bm" 2>&1 | tail -3) | tee $OUT/tests_rw.log
ROUNDS=7 OUT=$OUT timeout 200 python3 .dev/s35/ab.py rw2 time 2>&1 | tee $OUT/rw2_ab.log
P=packages/chord-kernels/src/chord_kernels/indexed
cp $P/planner.py /tmp/planner_new.py; cp $P/heuristics.py /tmp/heuristics_new.py
git show HEAD:$P/planner.py > $P/planner.py; git show HEAD:$P/heuristics.py > $P/heuristics.py
date -u
timeout 150 python3 -m chord_bench.layer --rounds 9 --scenarios ep8_tok5 ep8_tok8 ep8_masked8 tp8_512 tp8_1024 --out $OUT/layer_before 2>&1 | grep -v "^wrote" | tail -9
cp /tmp/planner_new.py $P/planner.py; cp /tmp/heuristics_new.py $P/heuristics.py
date -u
timeout 150 python3 -m chord_bench.layer --rounds 9 --scenarios ep8_tok5 ep8_tok8 ep8_masked8 tp8_512 tp8_1024 --out $OUT/layer_after 2>&1 | grep -v "^wrote" | tail -9
date -u
timeout 120 python3 -m chord_bench --quick --scenarios ep8_masked8 ep8_masked16 --impls chord-grouped --peer humming-kernels --no-plot --max-minutes 2 --out $OUT/grouped 2>&1 | tail -12
date -u
