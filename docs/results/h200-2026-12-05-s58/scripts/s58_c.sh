# Session 58 call c: the 23 cases of test_indexed_wgmma_gpu that call b's three workers ran out of memory on
# (80 GB card), again on one worker; call b's cubins (.dev/s58/cache58b.tar.xz) on top of session 57's cache.
set -x
export PYTHONPATH=$(pwd)/packages/chord-kernels/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache57
mkdir -p $CHORD_CACHE_DIR
tar -C .dev -xJf .dev/s57/cache57.tar.xz; tar -C $CHORD_CACHE_DIR -xJf .dev/s58/cache58b.tar.xz
IDS=$(pwd)/docs/results/h200-2026-12-05-s58/scripts/s58_c_ids.txt
cd packages/chord-kernels
timeout 300 python3 -m pytest -q -m gpu -p no:cacheprovider -rf --durations=8 $(cat $IDS) > $OUT/test_indexed_wgmma_gpu_c.log 2>&1
echo "rc=$? $(grep -E '(passed|failed)' $OUT/test_indexed_wgmma_gpu_c.log | tail -1)"; grep -E "^FAILED|^E  " $OUT/test_indexed_wgmma_gpu_c.log | cut -c1-220 | head
