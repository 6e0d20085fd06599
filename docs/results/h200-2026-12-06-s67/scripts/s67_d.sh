# Session 67 call d: test_indexed_wgmma_gpu.py whole on main (its CUDA-graph case of the CTA pairs was folded in
# after session 66's GPU runs), then racecheck to the end on small launches of the paired kernels.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache67 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
mkdir -p .dev/cache67; tar -C .dev/cache67 -xJf .dev/s66/cache66.tar.xz
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv,noheader
(cd packages/chord-kernels && timeout ${T:-290} python3 -m pytest -q -m gpu -p no:cacheprovider -rf -n 2 tests/test_indexed_wgmma_gpu.py > $OUT/tests_wgmma.log 2>&1
 echo "tests rc=$? $(tail -1 $OUT/tests_wgmma.log)"; grep -E "^FAILED|^ERROR" $OUT/tests_wgmma.log | cut -c1-200 | head -12; grep -E "^[.FEsx]+ +\[ *[0-9]+%\]" $OUT/tests_wgmma.log | tail -1)
date -u
unset PYTORCH_CUDA_ALLOC_CONF
for c in ring16x8_dynamic bm80_256k; do
  SHAPE=3,512,512,48,2 timeout 140 compute-sanitizer --tool racecheck --racecheck-report all --print-limit 100000 python3 .dev/s67/memcheck_diag.py $c > $OUT/racecheck_small_$c.log 2>&1
  echo "racecheck $c rc=$?"; grep -E "^ok|RACECHECK SUMMARY|ERROR SUMMARY" $OUT/racecheck_small_$c.log | head -3
  grep -oE "Potential [A-Z]+ hazard" $OUT/racecheck_small_$c.log | sort | uniq -c
  grep -oE "(Read|Write) Thread \([0-9,]+\) at .* in [a-z_]+\.cuh:[0-9]+" $OUT/racecheck_small_$c.log | sed -E 's/Thread \([0-9,]+\) at .* in / /' | sort | uniq -c | head -8
done
date -u
