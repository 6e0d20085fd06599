# Session 73 call b (carry [".dev/s71", ".dev/s72", ".dev/s73", ".whl"]), main 6749ffe: (1) dyn_ab.py — TP8's down in runs
# of N tiles, strided (the plan) against the dynamic order and run lengths, the down and the layer; (2) ncu's DRAM and
# L2 bytes of those downs at 8192 tokens (session 69: the down read its weights from DRAM about twice).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
mkdir -p .dev/cache71; for a in s71/cache s71/cache_device s71/cache_runs s71/cache_dev2 s71/cache_plan s72/cache_device72 s73/cache73; do tar -C .dev/cache71 -xJf .dev/$a.tar.xz; done
export CHORD_CACHE_DIR=$(pwd)/.dev/cache71
date -u; nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout ${AT:-240} python3 .dev/s73/dyn_ab.py time ${TOK:-8192,4096,12288,3072} 2>&1 | grep -v Warn | tee $OUT/dyn_ab.log
date -u
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,lts__t_sector_op_read_hit_rate.pct,lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum,lts__t_sectors_srcunit_tex_op_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed
timeout ${NT:-150} ncu --clock-control none --profile-from-start off --metrics $M --csv python3 .dev/s73/dyn_ab.py ncu 8192 > $OUT/ncu_down.csv 2>&1; echo ncu rc=$?
grep -v "^==" $OUT/ncu_down.csv | grep chord_indexed | awk -F'","' '{print $1, $(NF-2), $NF}' | tr -d '"'
date -u
