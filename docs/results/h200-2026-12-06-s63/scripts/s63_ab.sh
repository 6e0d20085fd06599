# Session 63 call ab: (1) session 62's shift_ab.py (run here from .dev/s63, the same file) on main as committed (plan / whole stages in place / whole stages with the
# pairs shifted, the one-block items of 72-104 tokens); (2) shift_plan.patch (those items planned on whole stages
# with the pairs shifted) applied on the device's copy, then the GPU tests over the kernels it changes, and
# chord_bench's tp8_8192 (the target scenario whose gate_up runs 96-token one-block items) against humming 0.1.19.
# Kernels: .dev/s63/cache63.tar.xz (main's precompile + shift_ab's) and cache63b.tar.xz (the patch's precompile).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache63 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
tar -C .dev -xJf .dev/s63/cache63.tar.xz; tar -C .dev/cache63 -xJf .dev/s63/cache63b.tar.xz
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv,noheader; git log --oneline -1
timeout 150 python3 docs/results/h200-2026-12-05-s62/scripts/shift_ab.py time ${CASES:-tp8_8192,ep8_72,ep8_171,ep8_85,tp8_3584} > $OUT/shift_ab.log 2>&1; echo ab rc=$?
date -u; grep -v "^ *$" $OUT/shift_ab.log | tail -12
patch -p1 < docs/results/h200-2026-12-06-s63/scripts/shift_plan.patch > /dev/null || exit
grep -q "GROUP_ONE_BLOCK_MAX_TOKENS = 104" packages/chord-kernels/src/chord_kernels/indexed/wgmma.py || exit
(cd packages/chord-kernels
 timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider -rf -n 4 tests/test_indexed_wgmma_gpu.py tests/test_subnormal_gpu.py \
   tests/test_indexed_gpu.py tests/test_indexed_topk_sum_gpu.py tests/test_indexed_silu_mul_gpu.py > $OUT/tests.log 2>&1
 echo tests rc=$? $(tail -1 $OUT/tests.log); grep -E "^FAILED|^ERROR" $OUT/tests.log | cut -c1-200 | head -8)
date -u
timeout 80 python3 -m chord_bench --scenarios tp8_8192 --draws uniform --rep-ms 8 --max-minutes 1.0 \
   --impls chord-indexed --peer humming-kernels --no-plot --out $OUT/bench > $OUT/bench.log 2>&1; echo bench rc=$?
date -u
grep -E "^\| (ep8|tp8)_[a-z0-9]+\*? +\|" $OUT/bench/table.md | cut -c1-200 | tail -4
