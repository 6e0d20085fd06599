# Session 69 call f (the working tree with WgmmaConfig.stream_out planned on the downs): stream_ab.py, the down
# with and without it (alone, with its top-k sum, the layer); then the GPU files of the downs' kernels.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src:$(pwd)/packages/chord-vllm/src PYTHONUNBUFFERED=1
mkdir -p .dev/cache69s; tar -C .dev/cache69s -xJf .dev/s69/cache69s.tar.xz; export CHORD_CACHE_DIR=$(pwd)/.dev/cache69s
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv,noheader
timeout ${AT:-150} python3 .dev/s69/stream_ab.py time ${SHAPES:-tp8192,ep341,ep43,ep16} 2>&1 | grep -v Warning
date -u
cd packages/chord-kernels
timeout 120 python3 ../../.dev/s69/precompile_topk_tests.py 2>&1 | grep -v Warning | tail -1
timeout ${TT:-150} python3 -m pytest -q -m gpu -n 2 -p no:cacheprovider -rf tests/test_indexed_topk_sum_gpu.py \
  tests/test_indexed_gpu.py -k "topk or local or routing_order or fused_moe or prepare_layer or graph or empty" > $OUT/tests_f.log 2>&1; tail -4 $OUT/tests_f.log
date -u
