# Session 60 call f: ncu source counters (instructions executed and stall samples per SASS line) of EP8's planned
# gate_up at 12 rows per expert, uniform routing (nothing cut), on the K-cut twin and on the uncut kernel
# (scripts/kcut_source_gateup.py): where the twin's remaining 0.2-0.9 % per layer goes. Kernels: .dev/s60/cache60.tar.xz.
set -x
export PYTHONPATH=$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache60
tar -C .dev -xJf .dev/s60/cache60.tar.xz
date -u; nvidia-smi --query-gpu=name --format=csv,noheader
S=docs/results/h200-2026-12-05-s60/scripts/kcut_source_gateup.py
for c in plan uncut; do
  timeout 100 ncu --clock-control none --profile-from-start off -k regex:wgmma --section SourceCounters \
    --section InstructionStats --section WarpStateStats --section SpeedOfLight --import-source no \
    -o $OUT/$c python3 $S $c > $OUT/ncu_$c.log 2>&1; echo ncu $c rc=$?
  ncu -i $OUT/$c.ncu-rep --page source --csv --print-source sass 2> $OUT/source_$c.err | gzip > $OUT/source_$c.csv.gz; echo src rc=$?
  ncu -i $OUT/$c.ncu-rep --page details > $OUT/details_$c.txt 2>&1
  grep -E "Duration|Executed Instructions |Issue Slots Busy|Warp Cycles Per Issued" $OUT/details_$c.txt | head
  rm -f $OUT/$c.ncu-rep
done
date -u
