# Session 59 call e: the planned split tail's final rule (gate_up of routing blocks up to 40 tokens, N >= 2048,
# K >= 4096). GPU tests that run it (the fused SiLU tests on one worker: two workers ran out of memory in call d),
# then chord_bench's GEMMs and layer against humming-kernels 0.1.19, both draws. Kernels: .dev/s59e/cache59.tar.xz.
set -x
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src:$(pwd)/packages/chord-vllm/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache59 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
tar -C .dev -xJf .dev/s59e/cache59.tar.xz
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv
cd packages/chord-kernels
timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider -rf tests/test_indexed_silu_mul_gpu.py \
   "tests/test_indexed_gpu.py::test_gemm_matches_reference" > $OUT/tests_silu.log 2>&1; echo silu tests rc=$?
grep -E "passed|failed|^FAILED" $OUT/tests_silu.log | cut -c1-200 | head -8
timeout 170 python3 -m pytest -q -m gpu -p no:cacheprovider -n 2 -rf tests/test_indexed_wgmma_gpu.py tests/test_indexed_split_tail_gpu.py \
   tests/test_routing_gpu.py > $OUT/tests_wgmma.log 2>&1; echo wgmma tests rc=$?
grep -E "passed|failed|^FAILED" $OUT/tests_wgmma.log | cut -c1-200 | head -12
timeout 40 compute-sanitizer --tool memcheck --report-api-errors no python3 -m pytest -q -m gpu -p no:cacheprovider \
   "tests/test_indexed_wgmma_gpu.py::test_wgmma_cuda_graph_capture_and_replay" > $OUT/memcheck.log 2>&1; echo memcheck rc=$?
grep -E "ERROR SUMMARY|passed|failed" $OUT/memcheck.log | tail -2
cd ../..
date -u
timeout 120 python3 -m chord_bench --scenarios ep8_tok16 ep8_tok43 ep8_masked16 ep8_masked32 tp8_1024 --draws uniform,skewed \
   --rep-ms 10 --impls chord-indexed,chord-grouped --peer humming-kernels --no-plot --out $OUT/bench > $OUT/bench.log 2>&1; echo bench rc=$?
date -u
for d in uniform skewed; do
  timeout 70 python3 -m chord_bench.layer --rounds 7 --draw $d --scenarios ep8_tok12 ep8_masked16 ep8_masked32 \
     --out $OUT/layer_$d > $OUT/layer_$d.log 2>&1; echo layer $d rc=$?
done
date -u
grep -E "^\| (ep8|tp8)_[a-z0-9]+\*? +\|" $OUT/bench/table.md | cut -c1-260 | tail -12
cat $OUT/layer_*/layer.md 2>/dev/null | grep -E "^\|" | cut -c1-200 | head -20
