# Session 67 call c: the rows of a later stage prefetched into L2 (exp_ab.py PREFETCH=1, wgmma.cuh's
# CHORD_EXP_PREFETCH hook), then the CTA pairs under compute-sanitizer with the default allocator: sanitize_pair.py
# whole under memcheck, one launch each of the paired ring and 80-token items under racecheck.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache67c PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
mkdir -p .dev/cache67c; tar -C .dev/cache67c -xJf .dev/s67/cache67p.tar.xz
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv,noheader
PREFETCH=1 timeout ${T:-200} python3 .dev/s67/exp_ab.py time ${SHAPES:-tp8192,ep64,ep43,ep341,ep128} 2>&1 | grep -v Warning
date -u
unset PYTORCH_CUDA_ALLOC_CONF
timeout 120 compute-sanitizer --tool memcheck --report-api-errors no python3 .dev/s67/sanitize_pair.py > $OUT/memcheck_pair.log 2>&1; echo "memcheck rc=$?"; tail -3 $OUT/memcheck_pair.log
for c in ring16x8_dynamic bm80_256k; do
  timeout 130 compute-sanitizer --tool racecheck --racecheck-report hazard python3 .dev/s67/memcheck_diag.py $c > $OUT/racecheck_$c.log 2>&1
  echo "racecheck $c rc=$?"; grep -E "^ok|ERROR SUMMARY|RACECHECK SUMMARY" $OUT/racecheck_$c.log | head -3
  grep -oE "(Read|Write) Thread .* at [^ ]+ .* in [a-z_]+\.cuh:[0-9]+" $OUT/racecheck_$c.log | sed -E 's/Thread \([0-9,]+\) at .* in /at /' | sort | uniq -c | head -8
done
date -u
