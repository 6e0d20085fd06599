# Session 61 call b (prepared on the CPU: no GPU was lent in session 61). The one-block items of 72-104 tokens and
# the 64 x 2 items (without row widths) with whole K stages commit per K group (commit_per_step; not planned): the
# bit-for-bit GPU test against the planned per-step loops and the reference, then the A/B of each GEMM as the layer
# runs it and of the grouped contiguous mode's (group_commits_ab.py; ~5 min, the target scenarios first).
# Kernels: .dev/s61/cache61.tar.xz (`python -m chord_kernels precompile`, group_commits_ab.py precompile and
# precompile_b.py on the CPU, the tree of this commit), so the device compiles nothing.
set -x
export PYTHONPATH=$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache61 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
tar -C .dev -xJf .dev/s61/cache61.tar.xz
date -u; nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader; git log --oneline -1
(cd packages/chord-kernels && timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider -rf tests/test_indexed_wgmma_gpu.py \
   -k "group_commits or commit_per_k_group or whole_stages" > $OUT/tests.log 2>&1; echo tests rc=$?
 grep -E "passed|failed|^FAILED" $OUT/tests.log | cut -c1-200 | tail -6)
OUT=$OUT timeout 330 python3 docs/results/h200-2026-12-05-s61/scripts/group_commits_ab.py time > $OUT/group_commits_ab.log 2>&1
echo ab rc=$?; date -u
cut -c1-200 $OUT/group_commits_ab.log
