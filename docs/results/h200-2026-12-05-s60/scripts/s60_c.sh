# Session 60 call c: compute-sanitizer on the K cut with its part in registers (fc2d860): memcheck and racecheck
# on the split-tail file's small cut shapes (as session 55's call a), then racecheck on the four-warpgroup fused
# SiLU cut (ep8_tok16's gate_up, 400 items: the kernel the change touched most; may run past its limit).
set -x
export PYTHONPATH=$(pwd)/packages/chord-kernels/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache59g
tar -C .dev -xJf .dev/s59g/cache59g.tar.xz
date -u; nvidia-smi --query-gpu=name --format=csv,noheader
cd packages/chord-kernels
for tool in memcheck racecheck; do
  timeout 120 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 1 python3 -m pytest -q -m gpu \
     -p no:cacheprovider tests/test_indexed_split_tail_gpu.py -k "m1 or every_item_cut or three_short" > $OUT/$tool.log 2>&1
  echo $tool rc=$?; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" $OUT/$tool.log | tail -3
done
date -u
timeout 240 compute-sanitizer --tool racecheck --report-api-errors no --error-exitcode 1 python3 -m pytest -q -m gpu \
   -p no:cacheprovider "tests/test_indexed_split_tail_gpu.py::test_split_tail_fused_silu_matches_two_steps[pairs_c4_k7168]" \
   > $OUT/racecheck_silu.log 2>&1
echo racecheck silu rc=$?; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" $OUT/racecheck_silu.log | tail -3
grep -E "^========= +(Error|Warning)|hazard" $OUT/racecheck*.log | sort | uniq -c | sort -rn | head -8
date -u
