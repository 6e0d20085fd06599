# Prepared in session 59 for the next session (not run: the device time was spent). scripts/kcut_registers.patch
# applied (the K cut's part, parts and tail item kept in uniform registers through the K loop instead of the
# staging tile: one named barrier, one shared store and three shuffles fewer per item; no new spills, CPU-checked).
# The split-tail GPU tests, the fused SiLU tests, then the layer A/B of the planned cut against the uncut plan
# (scripts/layer_cut_ab.py), to see whether the 0.2-1 % the cut costs where it cuts nothing goes.
# Kernels: git apply the patch, then CHORD_CACHE_DIR=.dev/cache59g python -m chord_kernels precompile --arch sm_90a,
# PYTHONPATH=packages/chord-bench/src CHORD_CACHE_DIR=.dev/cache59g python scripts/layer_cut_ab.py precompile 2,
# rm -f .dev/cache59g/*.lock; tar -cJf .dev/s59g/cache59g.tar.xz -C .dev cache59g; carry .dev/s59g and .whl.
set -x
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache59g PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
tar -C .dev -xJf .dev/s59g/cache59g.tar.xz
date -u; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
(cd packages/chord-kernels && timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider -rf tests/test_indexed_split_tail_gpu.py \
   tests/test_indexed_silu_mul_gpu.py > $OUT/tests.log 2>&1; echo tests rc=$?)
grep -E "passed|failed|^FAILED" $OUT/tests.log | cut -c1-200 | head -8
OUT=$OUT timeout 200 python3 docs/results/h200-2026-12-05-s59/scripts/layer_cut_ab.py time > $OUT/layer_cut_ab.log 2>&1; echo layer ab rc=$?
grep -v "^$" $OUT/layer_cut_ab.log | cut -c1-200 | tail -24
