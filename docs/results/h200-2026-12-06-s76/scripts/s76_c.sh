# Session 76 call c (carry [".dev/s76", ".whl"]): the shipped top-k sum (few-choice path, CTAS_PER_SM 4): its GPU tests
# and gemm_topk_sum's, chord-vllm core, topk_y.py again, then the layer at the decode and middle shapes.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src:$(pwd)/packages/chord-vllm/src PYTHONUNBUFFERED=1
mkdir -p .dev/cache76; for a in .dev/s76/cache*.tar.xz; do tar -C .dev/cache76 -xJf $a; done
export CHORD_CACHE_DIR=$(pwd)/.dev/cache76
date -u; nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout ${TT:-150} python3 -m pytest -q -p no:cacheprovider -m gpu packages/chord-kernels/tests/test_ops.py packages/chord-kernels/tests/test_indexed_topk_sum_gpu.py > $OUT/tests.log 2>&1; echo tests rc=$?; tail -3 $OUT/tests.log
(cd packages/chord-vllm && timeout 60 python3 -m pytest -q -m gpu -p no:cacheprovider -rf tests/test_core.py > $OUT/vllm.log 2>&1; echo "vllm rc=$? $(tail -n 1 $OUT/vllm.log)")
timeout ${AT:-75} python3 .dev/s76/topk_y.py 2>&1 | grep -v Warn | tee $OUT/topk_y.log
timeout ${LT:-150} python3 -m chord_bench.layer --rounds 3 --draw uniform --scenarios ${LS:-tp8_decode160 ep8_tok5 ep8_tok8 ep8_tok12 tp8_512 tp8_1024 ep8_tok43} \
  --out $OUT/layer > $OUT/layer.log 2>&1; echo layer rc=$?; grep -E "^(tp8|ep8)" $OUT/layer.log
find .dev/cache76 -newer .dev/s76/cache76n.tar.xz -type f | sed 's|.dev/cache76/||' > /tmp/new.txt; echo "new cache files: $(wc -l < /tmp/new.txt)"
[ -s /tmp/new.txt ] && tar -C .dev/cache76 -cJf $OUT/cache_new.tar.xz -T /tmp/new.txt
date -u
