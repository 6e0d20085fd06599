# Session 76 call a (carry [".dev/s76", ".whl"]): the local top-k sum's CTAs per token (topk_y.py, the hybrid
# patch), chord_bench (every target scenario on an H200; on an H100 the gap scenarios), the op's GPU tests, and on an
# H100 the decode layer (on an H200 that is call b).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
mkdir -p .dev/cache76; for a in .dev/s76/cache*.tar.xz; do tar -C .dev/cache76 -xJf $a; done
export CHORD_CACHE_DIR=$(pwd)/.dev/cache76
date -u; nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
timeout ${AT:-75} python3 .dev/s76/topk_y.py 2>&1 | grep -v Warn | tee $OUT/topk_y.log
case "$gpu" in
  *H200*) sc="ep8_decode tp8_decode160 ep8_tok16 ep8_tok43 ep8_tok128 ep8_tok341 tp8_1024 tp8_8192 ep8_masked8 ep8_masked16 ep8_masked32 ep8_masked64 ep8_contig256 ep8_contig512"; mm=4; bt=${BT:-320};;
  *) sc="ep8_decode tp8_decode160 ep8_tok43 ep8_tok128 tp8_8192 ep8_masked8"; mm=2; bt=${BT:-170};;
esac
timeout $bt python3 -m chord_bench --scenarios $sc --draws uniform --rep-ms 8 --max-minutes $mm \
  --impls chord-indexed,chord-grouped --peer humming-kernels --no-plot --out $OUT/bench > $OUT/bench.log 2>&1; echo bench rc=$?; date -u
timeout ${TT:-90} python3 -m pytest -q -p no:cacheprovider -m gpu packages/chord-kernels/tests/test_ops.py packages/chord-kernels/tests/test_indexed_topk_sum_gpu.py > $OUT/tests.log 2>&1; echo tests rc=$?; tail -3 $OUT/tests.log
case "$gpu" in
  *H200*) ;;
  *) timeout ${LT:-100} python3 -m chord_bench.layer --rounds 3 --draw uniform --scenarios tp8_decode160 ep8_tok5 ep8_tok8 tp8_512 \
       --out $OUT/layer > $OUT/layer.log 2>&1; echo layer rc=$?; grep -E "^(tp8|ep8)" $OUT/layer.log;;
esac
date -u
grep -E "^\| (ep8|tp8)_[a-z0-9]+\*? +\| uniform \| [0-9]" $OUT/bench/table.md | tr -s ' ' | cut -d'|' -f2,6-16
find .dev/cache76 -newer .dev/s76/s76_a.sh -type f | sed 's|.dev/cache76/||' > /tmp/new.txt; echo "new cache files: $(wc -l < /tmp/new.txt)"
[ -s /tmp/new.txt ] && tar -C .dev/cache76 -cJf $OUT/cache_new.tar.xz -T /tmp/new.txt
