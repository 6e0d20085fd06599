# Session 53 call b: the layer harness's new skewed draw -- its GPU tests, then the layer uniform and skewed.
set -x
tar -C .dev -xJf .dev/cache48.tar.xz; tar -C .dev -xJf .dev/cache48b_extra.tar.xz; tar -C .dev -xJf .dev/s48/cache50_extra.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache48
source .dev/env.sh
date -u; nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
(cd packages/chord-bench && timeout 240 python3 -m pytest -q -m gpu tests/test_layer.py -p no:cacheprovider) > $OUT/gpu_layer_tests.log 2>&1; echo tests rc=$?; tail -3 $OUT/gpu_layer_tests.log
S="tp8_1024 tp8_8192 ep8_tok12 ep8_tok43 ep8_tok128 ep8_tok341 ep8_masked16 ep8_masked32"
for d in skewed uniform; do
  date -u
  timeout 150 python3 -m chord_bench.layer --rounds 9 --draw $d --scenarios $S --out $OUT/layer_$d > $OUT/layer_$d.log 2>&1; echo layer $d rc=$?
done
date -u
for d in skewed uniform; do cat $OUT/layer_$d/layer.md; done
