set -x
tar -C .dev -xJf .dev/cache44a.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache43
source .dev/env.sh
date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
OUT=$OUT timeout 200 python3 .dev/s44/probe.py ab 2>&1 | tee $OUT/probe_ab.log
NCU=/usr/local/cuda/bin/ncu
mkdir -p /tmp/n
for c in "ep8_tok341 gu_slot" "ep8_tok341 dn_slot" "ep8_tok341 dn_ro" "ep8_tok128 gu_slot" "ep8_tok43 dn_slot"; do
  t=$(echo $c | tr ' ' '_')
  timeout 120 $NCU --clock-control none --set full -k regex:chord_indexed_wgmma --launch-skip 3 --launch-count 1 -f -o /tmp/n/$t python3 .dev/s44/probe.py ncu $c > /tmp/n/$t.txt 2>&1; tail -1 /tmp/n/$t.txt
  $NCU --import /tmp/n/$t.ncu-rep --page details --csv > /tmp/n/details_$t.csv 2>&1
  $NCU --import /tmp/n/$t.ncu-rep --page raw --csv > /tmp/n/raw_$t.csv 2>&1
  grep -E '"(Duration|Compute \(SM\) Throughput|Memory Throughput|L1/TEX Cache Throughput|L2 Cache Throughput|DRAM Throughput|Issue Slots Busy|No Eligible|Executed Ipc Active|Warp Cycles Per Issued Instruction)"' /tmp/n/details_$t.csv | cut -d, -f13- | head -12
done
tar -C /tmp/n -czf $OUT/ncu_a.tgz .
ls -la $OUT
date -u
