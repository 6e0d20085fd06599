# Session 57 call c: the final code (the contiguous pair in plain stream order) through the whole GPU test
# suite, file by file (every kernel's argument struct gained two fields).
# Kernels precompiled on the CPU (.dev/s57/cache57.tar.xz, CHORD_CACHE_DIR).
set -x
export PYTHONPATH=$(pwd)/packages/chord-kernels/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache57
mkdir -p $CHORD_CACHE_DIR
[ -f .dev/s57/cache57.tar.xz ] && tar -C .dev -xJf .dev/s57/cache57.tar.xz
date -u; nvidia-smi --query-gpu=name,memory.total --format=csv
MIB=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1); W=3; [ "$MIB" -lt 100000 ] && W=2
cd packages/chord-kernels
for f in test_grouped_gpu test_indexed_wgmma_gpu test_indexed_gpu test_indexed_topk_sum_gpu test_indexed_silu_mul_gpu \
         test_subnormal_gpu test_routing_gpu test_dequant_gpu; do
  timeout 100 python3 -m pytest -q -m gpu -p no:cacheprovider -n $W -rf tests/$f.py > $OUT/$f.log 2>&1
  echo "$f rc=$? $(grep -E '(passed|failed)' $OUT/$f.log | tail -1)"; grep -E "^FAILED" $OUT/$f.log | cut -c1-200
done
cd ../..
date -u
