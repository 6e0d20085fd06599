# Session 60 call d: the four-warpgroup fused SiLU cut on a small launch (the split-tail file's every_item_cut case,
# now also in its SiLU test: 5 items of ep8_tok16's gate_up kernel, every one cut), then compute-sanitizer
# racecheck with the hazard limit raised (call c hit the default limit) on it and the small cut shapes, and memcheck.
# Kernels: .dev/s60/cache60.tar.xz (session 59's cache plus that SiLU kernel).
set -x
export PYTHONPATH=$(pwd)/packages/chord-kernels/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache60 NV_COMPUTE_SANITIZER_MAX_RACECHECK_HAZARDS=100000000
tar -C .dev -xJf .dev/s60/cache60.tar.xz
date -u; nvidia-smi --query-gpu=name --format=csv,noheader
cd packages/chord-kernels
timeout 90 python3 -m pytest -q -m gpu -p no:cacheprovider -rf tests/test_indexed_split_tail_gpu.py -k silu > $OUT/silu.log 2>&1
echo silu tests rc=$?; grep -E "passed|failed|^FAILED" $OUT/silu.log | tail -3
SEL="tests/test_indexed_split_tail_gpu.py::test_split_tail_fused_silu_matches_two_steps[every_item_cut] tests/test_indexed_split_tail_gpu.py::test_split_tail_matches_reference[m1] tests/test_indexed_split_tail_gpu.py::test_split_tail_matches_reference[every_item_cut]"
timeout 60 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 1 python3 -m pytest -q -m gpu -p no:cacheprovider $SEL > $OUT/memcheck.log 2>&1
echo memcheck rc=$?; grep -E "ERROR SUMMARY|passed|failed" $OUT/memcheck.log | tail -2
timeout 300 compute-sanitizer --tool racecheck --report-api-errors no python3 -m pytest -q -m gpu -p no:cacheprovider $SEL > $OUT/racecheck.log 2>&1
echo racecheck rc=$?; grep -E "RACECHECK SUMMARY|passed|failed|Maximum" $OUT/racecheck.log | tail -3
grep -E "^=========  +and (Read|Write) access" $OUT/racecheck.log | sed -E 's/\+0x[0-9a-f]+//; s/\[[0-9]+ hazards\]//; s/<.*>//' | sort | uniq -c | head -12
grep -E "Error: Race|Warning: Race" $OUT/racecheck.log | sed -E 's/\+0x[0-9a-f]+//' | sort | uniq -c
date -u
