# Session 60 call b: the GPU suites on fc2d860 (the K cut's part in uniform registers): the WGMMA file, subnormal
# scales, the rest of the indexed family (one worker: Kimi-sized cases ran out of memory on two on an H100), top-k
# sum, grouped, routing, memcheck of the CUDA-graph cases, chord-vllm's core. Kernels: .dev/s59g/cache59g.tar.xz
# (built from the same kernel sources); kernels it lacks compile on the device.
set -x
export PYTHONPATH=$(pwd)/packages/chord-kernels/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache59g PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
tar -C .dev -xJf .dev/s59g/cache59g.tar.xz
date -u; nvidia-smi --query-gpu=name --format=csv,noheader; git log --oneline -1
cd packages/chord-kernels
t() { local name=$1 lim=$2; shift 2; timeout $lim python3 -m pytest -q -m gpu -p no:cacheprovider -rf "$@" > $OUT/$name.log 2>&1
      echo "$name rc=$? $(grep -E '^[0-9]+ (passed|failed)|passed|failed' $OUT/$name.log | tail -1)"; grep -E "^FAILED" $OUT/$name.log | cut -c1-200 | head -5; }
t wgmma 270 -n 2 tests/test_indexed_wgmma_gpu.py
t subnormal 80 -n 2 tests/test_subnormal_gpu.py
t indexed 150 tests/test_indexed_gpu.py tests/test_indexed_topk_sum_gpu.py
t grouped_routing 80 -n 2 tests/test_grouped_gpu.py tests/test_routing_gpu.py tests/test_dequant_gpu.py
timeout 40 compute-sanitizer --tool memcheck --report-api-errors no python3 -m pytest -q -m gpu -p no:cacheprovider \
   "tests/test_indexed_wgmma_gpu.py::test_wgmma_cuda_graph_capture_and_replay" > $OUT/memcheck.log 2>&1; echo memcheck rc=$?
grep -E "ERROR SUMMARY|passed|failed" $OUT/memcheck.log | tail -2
cd ../chord-vllm && PYTHONPATH=$PYTHONPATH:$(pwd)/src timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_core.py > $OUT/vllm_core.log 2>&1
echo vllm core rc=$? $(tail -1 $OUT/vllm_core.log)
date -u
