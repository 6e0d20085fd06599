# Session 75 call b (carry [".dev/s71", ".dev/s72", ".dev/s73", ".dev/s74", ".dev/s75", ".whl"]): the local top-k
# sum's CTAs per token (topk_y.py), its GPU tests (the op's and gemm_topk_sum's), then the layer.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
mkdir -p .dev/cache71; for a in s71/cache s71/cache_device s71/cache_runs s71/cache_dev2 s71/cache_plan s72/cache_device72 s73/cache73 s73/cache73c s73/cache73d s74/cache74 s75/cache75; do tar -C .dev/cache71 -xJf .dev/$a.tar.xz; done
export CHORD_CACHE_DIR=$(pwd)/.dev/cache71
date -u; nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout ${AT:-90} python3 .dev/s75/topk_y.py 2>&1 | grep -v Warn | tee $OUT/topk_y.log
timeout ${TT:-120} python3 -m pytest -q -p no:cacheprovider -m gpu packages/chord-kernels/tests/test_ops.py packages/chord-kernels/tests/test_indexed_topk_sum_gpu.py > $OUT/tests.log 2>&1; echo tests rc=$?; tail -3 $OUT/tests.log
timeout ${LT:-100} python3 -m chord_bench.layer --rounds 3 --draw uniform --scenarios tp8_decode160 ep8_tok5 ep8_tok8 tp8_512 \
  --out $OUT/layer > $OUT/layer.log 2>&1; echo layer rc=$?; grep -E "^(tp8|ep8)" $OUT/layer.log
date -u
