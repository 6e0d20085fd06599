# Session 70 call b: the rest of chord-kernels' GPU files, chord-vllm's and chord-bench's GPU tests on main, then
# compute-sanitizer memcheck on TP8's stream_out downs (small shapes).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src:$(pwd)/packages/chord-vllm/src PYTHONUNBUFFERED=1
mkdir -p .dev/cache70; tar -C .dev/cache70 -xJf .dev/s70/cache.tar.xz; [ -f .dev/s70/cache_device.tar.xz ] && tar -C .dev/cache70 -xJf .dev/s70/cache_device.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache70
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv,noheader
(cd packages/chord-kernels && timeout ${TT:-420} python3 -m pytest -q -m gpu -p no:cacheprovider -rf -n 2 --durations=5 tests/test_indexed_wgmma_gpu.py tests/test_indexed_gpu.py tests/test_indexed_silu_mul_gpu.py tests/test_indexed_topk_sum_gpu.py tests/test_indexed_split_tail_gpu.py tests/test_subnormal_gpu.py tests/test_routing_gpu.py tests/test_dequant_gpu.py > $OUT/tests_b.log 2>&1
 echo "tests rc=$? $(tail -n 1 $OUT/tests_b.log)"; grep -E "^FAILED|^ERROR" $OUT/tests_b.log | cut -c1-200 | head -8)
date -u
(cd packages/chord-vllm && timeout 60 python3 -m pytest -q -m gpu -p no:cacheprovider -rf tests/test_core.py > $OUT/vllm.log 2>&1; echo "vllm rc=$? $(tail -n 1 $OUT/vllm.log)")
(cd packages/chord-bench && timeout 60 python3 -m pytest -q -m gpu -p no:cacheprovider -rf > $OUT/bench_tests.log 2>&1; echo "bench tests rc=$? $(tail -n 1 $OUT/bench_tests.log)")
date -u
(cd packages/chord-kernels && timeout ${ST:-60} compute-sanitizer --tool memcheck --error-exitcode 0 python3 -m pytest -q -m gpu -p no:cacheprovider -x tests/test_indexed_wgmma_gpu.py -k "four_consumer_runs" > $OUT/memcheck.log 2>&1; echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY|passed|failed' $OUT/memcheck.log | tail -n 2 | tr '\n' ' ')"; grep -c "Invalid" $OUT/memcheck.log)
date -u
