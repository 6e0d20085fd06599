# Session 57 call a: the grouped contiguous mode's pair of launches (wide items or 64 x 2 items, chosen
# in the kernel from m_indices). GPU tests (the grouped family, with session 56's unrun block-cut test and
# its fused SiLU-and-mul twin; the contiguous split-tail cases), the pair's A/B against each launch alone,
# then the contiguous scenarios against humming-kernels 0.1.19 (wheel in .whl) on both draws.
# Kernels precompiled on the CPU (.dev/s57/cache57.tar.xz, CHORD_CACHE_DIR).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
set -x
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache57
mkdir -p $CHORD_CACHE_DIR
[ -f .dev/s57/cache57.tar.xz ] && tar -C .dev -xJf .dev/s57/cache57.tar.xz
date -u; git log --oneline -1 2>/dev/null; nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
(cd packages/chord-kernels && timeout 210 python3 -m pytest -q -m gpu -p no:cacheprovider -n 4 tests/test_grouped_gpu.py \
    tests/test_indexed_split_tail_gpu.py -k "not split_tail or contiguous" > $OUT/gpu_tests.log 2>&1; echo tests rc=$?)
grep -E "passed|failed|^FAILED|^E  " $OUT/gpu_tests.log | cut -c1-200 | tail -20
date -u
timeout 150 python3 ci/contiguous_pair_ab.py --out $OUT/ab > $OUT/ab.log 2>&1; echo ab rc=$?
date -u
timeout 140 python3 -m chord_bench --scenarios ep32_contig128,ep8_contig128,ep8_tok128 --draws uniform,skewed --rep-ms 10 \
    --impls chord-grouped --peer humming-kernels --no-plot --max-minutes 2 --out $OUT/bench > $OUT/bench.log 2>&1; echo bench rc=$?
date -u
cat $OUT/ab.log | grep -v "^$" | cut -c1-230 | tail -20
tail -30 $OUT/bench.log | cut -c1-220
