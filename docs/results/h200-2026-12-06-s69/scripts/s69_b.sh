# Session 69 call b: the single-slot twin of EP's down (WgmmaConfig.topk_singles) against the plain two steps
# (singles_ab.py), then its GPU tests. Kernels precompiled on the CPU (.dev/s69/cache69.tar.xz), the tests'
# own compiled here first, eight at a time (precompile_topk_tests.py).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src:$(pwd)/packages/chord-vllm/src PYTHONUNBUFFERED=1
mkdir -p .dev/cache69; tar -C .dev/cache69 -xJf .dev/s69/cache69.tar.xz; export CHORD_CACHE_DIR=$(pwd)/.dev/cache69
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv,noheader
timeout ${AT:-300} python3 .dev/s69/singles_ab.py time ${ROWS:-16,43,64,128,341,200,32,100} 2>&1 | grep -v Warning
date -u
cd packages/chord-kernels
timeout 200 python3 ../../.dev/s69/precompile_topk_tests.py 2>&1 | grep -v Warning | tail -3
date -u
timeout ${TT:-240} python3 -m pytest -q -m gpu -n 2 -p no:cacheprovider -rf tests/test_indexed_topk_sum_gpu.py tests/test_indexed_gpu.py -k "topk or local or fused_moe or routing_order or prepare_layer or graph" > $OUT/tests_b.log 2>&1; tail -6 $OUT/tests_b.log
date -u
cd ../.. && find .dev/cache69 -newer .dev/s69/cache69.tar.xz -type f | tar -cJf $OUT/cache69_new.tar.xz -T - 2>/dev/null; ls -la $OUT/cache69_new.tar.xz
