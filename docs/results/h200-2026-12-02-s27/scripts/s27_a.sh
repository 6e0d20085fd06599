set -x
export CHORD_CACHE_DIR=$(pwd)/.dev/cache27
source .dev/env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
NCU=$(which ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1); echo NCU=$NCU
python3 .dev/s27/pairs_ncu.py precompile 16 2>&1 | tail -4
python3 .dev/s27/pairs_ncu.py time 2>&1 | tee $OUT/pairs.log
for c in one pairs; do
  timeout 150 $NCU --clock-control none --set full --import-source yes -k regex:chord_indexed_wgmma --launch-skip 2 --launch-count 1 -f -o $OUT/ncu_$c python3 .dev/s27/pairs_ncu.py ncu $c > $OUT/ncu_$c.txt 2>&1; tail -3 $OUT/ncu_$c.txt
  $NCU --import $OUT/ncu_$c.ncu-rep --page raw --csv > $OUT/raw_$c.csv 2>&1
  $NCU --import $OUT/ncu_$c.ncu-rep --page details --csv > $OUT/details_$c.csv 2>&1
  $NCU --import $OUT/ncu_$c.ncu-rep --page source --csv --print-source sass > $OUT/source_$c.csv 2>&1; head -c 600 $OUT/source_$c.csv
done
ls -la $OUT
grep -E '"Duration"|"Memory Throughput"|"DRAM Throughput"|"Compute \(SM\) Throughput"|Bank' $OUT/details_one.csv | cut -c1-300 | head
grep -E '"Duration"|"Memory Throughput"|"DRAM Throughput"|"Compute \(SM\) Throughput"|Bank' $OUT/details_pairs.csv | cut -c1-300 | head
cat $OUT/pairs.log
