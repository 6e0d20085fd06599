# Session 75 call a (carry [".dev/s71", ".dev/s72", ".dev/s73", ".dev/s74", ".dev/s75", ".whl"]): the top-k sum's grid
# (A/B, GPU tests), then chord_bench (every target scenario on an H200, the first since session 61; on an H100 the
# scenarios session 74 left out), then the decode layer with the patched sum.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
mkdir -p .dev/cache71; for a in s71/cache s71/cache_device s71/cache_runs s71/cache_dev2 s71/cache_plan s72/cache_device72 s73/cache73 s73/cache73c s73/cache73d s74/cache74; do tar -C .dev/cache71 -xJf .dev/$a.tar.xz; done
export CHORD_CACHE_DIR=$(pwd)/.dev/cache71
date -u; nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
timeout ${AT:-60} python3 .dev/s74/topk_ab.py 2>&1 | grep -v Warn | tee $OUT/topk_ab.log
timeout ${TT:-90} python3 -m pytest -q -x -p no:cacheprovider -m gpu packages/chord-kernels/tests/test_ops.py packages/chord-kernels/tests/test_indexed_topk_sum_gpu.py > $OUT/tests.log 2>&1; echo tests rc=$?; tail -3 $OUT/tests.log
case "$gpu" in
  *H200*) sc="ep8_decode tp8_decode160 ep8_tok16 ep8_tok43 ep8_tok128 ep8_tok341 tp8_1024 tp8_8192 ep8_masked8 ep8_masked16 ep8_masked32 ep8_masked64 ep8_contig256 ep8_contig512"; mm=4; bt=${BT:-330};;
  *) sc="ep8_masked64 ep8_contig256 ep8_contig512 tp8_8192"; mm=2; bt=${BT:-170};;
esac
timeout $bt python3 -m chord_bench --scenarios $sc --draws uniform --rep-ms 8 --max-minutes $mm \
  --impls chord-indexed,chord-grouped --peer humming-kernels --no-plot --out $OUT/bench > $OUT/bench.log 2>&1; echo bench rc=$?; date -u
timeout ${LT:-60} python3 -m chord_bench.layer --rounds 3 --draw uniform --scenarios tp8_decode160 ep8_tok8 \
  --out $OUT/layer > $OUT/layer.log 2>&1; echo layer rc=$?; grep -E "^(tp8|ep8)" $OUT/layer.log
date -u
grep -E "^\| (ep8|tp8)_[a-z0-9]+\*? +\| uniform \| [0-9]" $OUT/bench/table.md | tr -s ' ' | cut -d'|' -f2,6-16
