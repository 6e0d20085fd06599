set -x
export CHORD_CACHE_DIR=$(pwd)/.dev/cache27
source .dev/env.sh
NCU=/usr/local/cuda/bin/ncu
python3 .dev/s27/pairs_ncu.py precompile 16 2>&1 | tail -4
mkdir -p /tmp/n
for c in one pairs; do
  timeout 150 $NCU --clock-control none --section SourceCounters --section WarpStateStats --section InstructionStats --section SchedulerStats --import-source yes -k regex:chord_indexed_wgmma --launch-skip 2 --launch-count 1 -f -o /tmp/n/ncu_$c python3 .dev/s27/pairs_ncu.py ncu $c > /tmp/n/ncu_$c.txt 2>&1; tail -2 /tmp/n/ncu_$c.txt
  $NCU --import /tmp/n/ncu_$c.ncu-rep --page source --csv --print-source sass > /tmp/n/source_$c.csv 2>&1
  $NCU --import /tmp/n/ncu_$c.ncu-rep --page raw --csv > /tmp/n/raw_$c.csv 2>&1
done
tar -C /tmp/n -czf $OUT/ncu_src.tgz .
ls -la /tmp/n $OUT
