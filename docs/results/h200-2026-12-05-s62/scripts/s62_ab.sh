# Session 62 call ab (one call: device starts were refused for an hour): (1) the GPU tests session 61 did not run on
# the current kernels (5ba2bbe's compaction by lane scans): chord-kernels' grouped, routing, dequant, ops and jit
# GPU tests, memcheck of the four-warpgroup K-cut launches, chord-vllm's core, chord-bench's GPU tests (and
# chord-pack's GPU test where its dependencies import); (2) the compaction against the loop it replaced
# (compact_ab.py); (3) the whole layer at the planned block against 64 x 2 items (layer_blk62.py).
# Kernels: .dev/s62/cache62.tar.xz (precompile of this tree plus both scripts' precompile).
set -x
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache62 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
tar -C .dev -xJf .dev/s62/cache62.tar.xz
date -u; nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
(cd packages/chord-kernels
 timeout 100 python3 -m pytest -q -m gpu -p no:cacheprovider -rf -n 2 tests/test_grouped_gpu.py tests/test_routing_gpu.py \
   tests/test_dequant_gpu.py tests/test_ops.py tests/test_jit.py > $OUT/kernels_gpu.log 2>&1
 echo kernels gpu rc=$? $(tail -1 $OUT/kernels_gpu.log); grep -E "^FAILED" $OUT/kernels_gpu.log | cut -c1-200 | head -8
 SEL="tests/test_indexed_split_tail_gpu.py::test_split_tail_fused_silu_matches_two_steps[every_item_cut] tests/test_indexed_split_tail_gpu.py::test_split_tail_matches_reference[every_item_cut]"
 timeout 45 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 1 python3 -m pytest -q -m gpu -p no:cacheprovider $SEL > $OUT/memcheck.log 2>&1
 echo memcheck rc=$?; grep -E "ERROR SUMMARY|passed|failed" $OUT/memcheck.log | tail -2)
(cd packages/chord-vllm && PYTHONPATH=$PYTHONPATH:$(pwd)/src timeout 30 python3 -m pytest -q -p no:cacheprovider tests/test_core.py > $OUT/vllm_core.log 2>&1
 echo vllm core rc=$? $(tail -1 $OUT/vllm_core.log))
(cd packages/chord-bench && timeout 60 python3 -m pytest -q -m gpu -p no:cacheprovider -rf tests/test_gpu.py > $OUT/bench_tests.log 2>&1
 echo bench tests rc=$? $(tail -1 $OUT/bench_tests.log))
(cd packages/chord-pack && PYTHONPATH=$PYTHONPATH:$(pwd)/src python3 -c "import safetensors, compressed_tensors, typer" 2>/dev/null \
 && { timeout 30 python3 -m pytest -q -p no:cacheprovider tests/test_grouped_gpu.py > $OUT/pack_gpu.log 2>&1; echo pack gpu rc=$? $(tail -1 $OUT/pack_gpu.log); } \
 || echo "pack gpu: dependencies not on the device, not run")
timeout 60 python3 .dev/s62/compact_ab.py time > $OUT/compact_ab.log 2>&1; echo ab rc=$?
timeout 200 python3 .dev/s62/layer_blk62.py time > $OUT/layer_blk62.log 2>&1; echo blk rc=$?
date -u
tail -12 $OUT/compact_ab.log
tail -22 $OUT/layer_blk62.log
