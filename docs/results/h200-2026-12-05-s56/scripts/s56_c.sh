# Session 56 call c: the layer on both draws against vLLM + humming-kernels 0.1.19 (the wheel carried in .whl).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
set -x
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache
mkdir -p $CHORD_CACHE_DIR
date -u; nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
S="tp8_1024 tp8_8192 ep8_tok12 ep8_tok43 ep8_tok128 ep8_tok341 ep8_masked16 ep8_masked32"
for d in skewed uniform; do
  date -u
  timeout 250 python3 -m chord_bench.layer --rounds 9 --draw $d --scenarios $S --out $OUT/layer_$d > $OUT/layer_$d.log 2>&1; echo layer $d rc=$?
done
date -u
for d in skewed uniform; do cat $OUT/layer_$d/layer.md; tail -5 $OUT/layer_$d.log; done
