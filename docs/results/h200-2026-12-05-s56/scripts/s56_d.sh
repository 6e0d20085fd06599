# Session 56 call d: the contiguous mode's planned block cut (grouped.contiguous_tail_config) -- its GPU
# test (the bits of the uncut items, plain and with the fused SiLU-and-mul), the contiguous split-tail
# tests, then the contiguous scenarios it cuts against humming-kernels 0.1.19 (wheel in .whl).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
set -x
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache
mkdir -p $CHORD_CACHE_DIR
[ -f .dev/s56/cache56.tar.xz ] && tar -C .dev -xJf .dev/s56/cache56.tar.xz
date -u; git log --oneline -1 2>/dev/null; nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
(cd packages/chord-kernels && timeout 90 python3 -m pytest -q -m gpu -p no:cacheprovider -n 3 tests/test_grouped_gpu.py \
    tests/test_indexed_split_tail_gpu.py -k "sparse_last_round or contiguous_matches or contiguous_mode" \
    > $OUT/gpu_tests.log 2>&1; echo tests rc=$?)
grep -E "passed|failed|^FAILED|^E  " $OUT/gpu_tests.log | cut -c1-200 | tail -20
date -u
timeout 80 python3 -m chord_bench --scenarios ep32_contig128 --draws uniform --rep-ms 10 \
    --impls chord-grouped --peer humming-kernels --no-plot --max-minutes 1 --out $OUT/bench > $OUT/bench.log 2>&1; echo bench rc=$?
date -u
tail -25 $OUT/bench.log | cut -c1-220
