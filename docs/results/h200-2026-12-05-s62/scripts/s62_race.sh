# Session 62 call race: compute-sanitizer racecheck (hazard limit raised) on the four-warpgroup fused SiLU cut
# (every item cut; the kernel whose 4-byte spill the compaction by lane scans removed) on the current kernels.
export PYTHONPATH=$(pwd)/packages/chord-kernels/src CHORD_CACHE_DIR=$(pwd)/.dev/cache62 NV_COMPUTE_SANITIZER_MAX_RACECHECK_HAZARDS=100000000
[ -d .dev/cache62 ] || tar -C .dev -xJf .dev/s62/cache62.tar.xz
cd packages/chord-kernels; date -u
timeout 200 compute-sanitizer --tool racecheck --report-api-errors no python3 -m pytest -q -m gpu -p no:cacheprovider \
  "tests/test_indexed_split_tail_gpu.py::test_split_tail_fused_silu_matches_two_steps[every_item_cut]" > $OUT/racecheck.log 2>&1
echo racecheck rc=$?; grep -E "RACECHECK SUMMARY|passed|failed|Maximum" $OUT/racecheck.log | tail -3
grep -E "Error: Race|Warning: Race" $OUT/racecheck.log | sed -E 's/\+0x[0-9a-f]+//' | sort | uniq -c | head; date -u
