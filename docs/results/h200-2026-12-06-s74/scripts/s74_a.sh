# Session 74 call a (prepared in 73; carry [".dev/s71", ".dev/s72", ".dev/s73", ".dev/s74", ".whl"]): (1) every target
# scenario of chord_bench plus the decode ones, against humming-kernels 0.1.19 (on an H200 if one comes: the first since
# session 61); (2) the layer at the decode shapes; (3) where Chord's layer spends its time at TP8 160 tokens (0.97x on
# session 73's H100) and EP8 8 rows per expert.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
mkdir -p .dev/cache71; for a in s71/cache s71/cache_device s71/cache_runs s71/cache_dev2 s71/cache_plan s72/cache_device72 s73/cache73 s73/cache73c s73/cache73d; do tar -C .dev/cache71 -xJf .dev/$a.tar.xz; done
export CHORD_CACHE_DIR=$(pwd)/.dev/cache71
date -u; nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout ${BT:-150} python3 -m chord_bench --scenarios ep8_decode tp8_decode160 ep8_tok16 ep8_tok43 ep8_tok128 ep8_tok341 tp8_1024 tp8_8192 \
  ep8_masked8 ep8_masked16 ep8_masked32 ep8_masked64 ep8_contig256 ep8_contig512 --draws uniform --rep-ms 8 --max-minutes 1 \
  --impls chord-indexed,chord-grouped --peer humming-kernels --no-plot --out $OUT/bench > $OUT/bench.log 2>&1; echo bench rc=$?; date -u
timeout ${LT:-100} python3 -m chord_bench.layer --rounds 5 --draw uniform --scenarios tp8_decode160 ep8_tok5 ep8_tok8 ep8_masked8 \
  --out $OUT/layer > $OUT/layer.log 2>&1; echo layer rc=$?; grep -E "^(tp8|ep8)" $OUT/layer.log
timeout ${PT:-90} python3 .dev/s74/prof_layer.py tp8_160 ep8_8 2>&1 | grep -v Warn | tee $OUT/prof_layer.log
date -u
grep -E "^\| (ep8|tp8)_[a-z0-9]+\*? +\| uniform \| [0-9]" $OUT/bench/table.md | tr -s ' ' | cut -d'|' -f2,6-16
