set -x
tar -C .dev -xJf .dev/cache34.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache34
source .dev/env.sh
date -u
H=packages/chord-kernels/src/chord_kernels/indexed/heuristics.py
cp $H /tmp/heuristics_new.py
git show 23c388f:$H > $H   # the block rule before this session (64 at 44-51 rows per expert)
timeout 120 python3 -m chord_bench.layer --rounds 9 --scenarios ep8_tok48 tp8_2304 ep8_masked48 --out $OUT/layer_before 2>&1 | grep -v "^wrote" | tail -9
cp /tmp/heuristics_new.py $H
timeout 120 python3 -m chord_bench.layer --rounds 9 --scenarios ep8_tok48 tp8_2304 ep8_masked48 --out $OUT/layer_after 2>&1 | grep -v "^wrote" | tail -9
date -u
