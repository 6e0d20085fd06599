# Session 61 call c: compact_scan.patch (the launch's item compaction by lane scans: no spill in any default
# configuration) applied on the device's copy, then the GPU suites over the kernels it changes (every WGMMA and
# decode kernel): the WGMMA and subnormal files, the split tail and fused SiLU, the indexed family with the top-k
# sum. Kernels: .dev/s61/cache61c.tar.xz (precompile of the tree with the patch before the planner change of
# 9746205; `precompile` here builds the rest).
set -x
patch -p1 < docs/results/h200-2026-12-05-s61/scripts/compact_scan.patch || exit
grep -q "warps_run" packages/chord-kernels/src/chord_kernels/include/chord/indexed/scheduler.cuh || exit
export PYTHONPATH=$(pwd)/packages/chord-kernels/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache61c PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
tar -C .dev -xJf .dev/s61/cache61c.tar.xz
date -u; nvidia-smi --query-gpu=name --format=csv,noheader
timeout 90 python3 -m chord_kernels precompile > $OUT/precompile.log 2>&1; echo precompile rc=$? $(tail -1 $OUT/precompile.log)
cd packages/chord-kernels
t() { local name=$1 lim=$2; shift 2; timeout $lim python3 -m pytest -q -m gpu -p no:cacheprovider -rf "$@" > $OUT/$name.log 2>&1
      echo "$name rc=$? $(grep -E '^[0-9]+ (passed|failed)|passed|failed' $OUT/$name.log | tail -1)"; grep -E "^FAILED" $OUT/$name.log | cut -c1-200 | head -5; }
t wgmma 190 -n 4 tests/test_indexed_wgmma_gpu.py tests/test_subnormal_gpu.py
t split_silu 90 -n 2 tests/test_indexed_split_tail_gpu.py tests/test_indexed_silu_mul_gpu.py
t indexed 100 -n 2 tests/test_indexed_gpu.py tests/test_indexed_topk_sum_gpu.py
date -u
