set -x
tar -C .dev -xJf .dev/cache44b.tar.xz
tar -C .dev -xJf .dev/cache45a_extra.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache43
source .dev/env.sh
date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
python3 .dev/s45/l2_ab.py precompile 16 2>&1 | tail -2
(while true; do nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader >> $OUT/clocks.log; sleep 1; done) & SAMPLER=$!
OUT=$OUT timeout 330 python3 .dev/s45/l2_ab.py time ep8_tok341,tp8_8192,ep8_tok128,ep8_tok43 2>&1 | tee $OUT/l2_ab_a.log
kill $SAMPLER
date -u
M=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sector_hit_rate.pct,sm__pipe_tensor_op_hgmma_cycles_active.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second
for c in "ep8_tok341 gate_up" "ep8_tok341 down" "tp8_8192 gate_up"; do
  set -- $c
  timeout 150 ncu --clock-control none --metrics $M --launch-skip 3 --launch-count 3 --kernel-name regex:indexed_wgmma python3 .dev/s45/l2_ab.py ncu $1 $2 > $OUT/ncu_$1_$2.txt 2>&1
done
date -u
for f in $OUT/ncu_*.txt; do echo "== $f"; grep -E "dram__bytes|gpu__time_duration|hit_rate|hgmma|srcunit|per_second|==PROF==|rror" $f; done
cat $OUT/l2_ab_a.log | grep -v "^+"
