# Session 59 call b: ncu source counters (warp instructions executed and stall samples per SASS line) of the
# contiguous 64 x 2 down (EP8, 512 rows per expert: the split tail cuts nothing) on the plan's kernel and on its
# K-cut twin (tail_parts=4) with kcut_uniform applied, to find the 2-3.5 % the twin still costs (call a).
set -x
export PYTHONPATH=$(pwd)/packages/chord-kernels/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache58u
tar -C .dev -xJf .dev/s58u/cache58u.tar.xz
date -u; nvidia-smi --query-gpu=name --format=csv
S=docs/results/h200-2026-12-05-s59/scripts/kcut_source.py
for c in plan tail4; do
  timeout 200 ncu --clock-control none --profile-from-start off -k regex:wgmma --section SourceCounters \
    --section InstructionStats --section WarpStateStats --section SpeedOfLight --import-source no \
    -o $OUT/$c python3 $S $c > $OUT/ncu_$c.log 2>&1; echo ncu $c rc=$?
  ncu -i $OUT/$c.ncu-rep --page source --csv --print-source sass > $OUT/source_$c.csv 2> $OUT/source_$c.err; echo src rc=$?
  ncu -i $OUT/$c.ncu-rep --page details > $OUT/details_$c.txt 2>&1
  grep -E "Duration|Executed Instructions |Issue Slots Busy|Warp Cycles Per Issued" $OUT/details_$c.txt | head
  head -c 600 $OUT/source_$c.csv; echo; wc -l $OUT/source_$c.csv
  rm -f $OUT/$c.ncu-rep
done
date -u
