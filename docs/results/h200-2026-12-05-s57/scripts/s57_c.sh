# Session 57 call c: the final code (the contiguous pair in plain stream order) through the whole GPU test
# suite (every kernel's argument struct gained two fields), then memcheck on the pair's test.
# Kernels precompiled on the CPU (.dev/s57/cache57.tar.xz, CHORD_CACHE_DIR).
set -x
export PYTHONPATH=$(pwd)/packages/chord-kernels/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache57
mkdir -p $CHORD_CACHE_DIR
[ -f .dev/s57/cache57.tar.xz ] && tar -C .dev -xJf .dev/s57/cache57.tar.xz
date -u; nvidia-smi --query-gpu=name,memory.total --format=csv
MIB=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1); W=3; [ "$MIB" -lt 100000 ] && W=2
(cd packages/chord-kernels && timeout 400 python3 -m pytest -q -m gpu -p no:cacheprovider -n $W -rf tests/ \
    > $OUT/gpu_tests.log 2>&1; echo tests rc=$?)
grep -E "passed|failed|^FAILED|^ERROR" $OUT/gpu_tests.log | cut -c1-200 | tail -25
date -u
(cd packages/chord-kernels && timeout 80 compute-sanitizer --tool memcheck --report-api-errors no python3 -m pytest -q -m gpu \
    -p no:cacheprovider tests/test_grouped_gpu.py -k pair_runs > $OUT/memcheck.log 2>&1; echo memcheck rc=$?)
grep -E "ERROR SUMMARY|passed|failed" $OUT/memcheck.log | tail -3
date -u
