# Session 74 call b (carry [".dev/s71", ".dev/s72", ".dev/s73", ".dev/s74", ".whl"]): the local top-k sum on a 2-D
# grid — A/B against the loop kernel, its GPU tests, and the layer against humming's path.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
mkdir -p .dev/cache71; for a in s71/cache s71/cache_device s71/cache_runs s71/cache_dev2 s71/cache_plan s72/cache_device72 s73/cache73 s73/cache73c s73/cache73d s74/cache74; do tar -C .dev/cache71 -xJf .dev/$a.tar.xz; done
export CHORD_CACHE_DIR=$(pwd)/.dev/cache71
date -u; nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout ${AT:-90} python3 .dev/s74/topk_ab.py 2>&1 | grep -v Warn | tee $OUT/topk_ab.log
timeout ${TT:-200} python3 -m pytest -q -x -p no:cacheprovider -m gpu packages/chord-kernels/tests/test_ops.py packages/chord-kernels/tests/test_indexed_topk_sum_gpu.py > $OUT/tests.log 2>&1; echo tests rc=$?; tail -3 $OUT/tests.log
timeout ${LT:-150} python3 -m chord_bench.layer --rounds ${LR:-5} --draw uniform --scenarios ${LS:-tp8_decode160 ep8_tok8 tp8_512 tp8_1024 tp8_4096 tp8_8192} \
  --out $OUT/layer > $OUT/layer.log 2>&1; echo layer rc=$?; grep -E "^(tp8|ep8)" $OUT/layer.log
[ "${PT:-60}" = 0 ] || timeout ${PT:-60} python3 .dev/s74/prof_layer.py tp8_160 tp8_8192 2>&1 | grep -E "^(tp8|ep8)|chord_|elementwise|Triton|void" | tee $OUT/prof_layer.log
date -u
