# Session 80 call c (carry [".dev/s80", ".whl"]): ncu (clocks not controlled) of the down GEMM as the layer runs it,
# at EP8 43 rows per expert and TP8 8192 tokens: speed of light, warp states, and the SASS lines with their stall samples.
case "$(nvidia-smi --query-gpu=name --format=csv,noheader)" in *H200*) exec bash .dev/s80/s80_b.sh;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src PYTHONUNBUFFERED=1
mkdir -p .dev/cache80; for a in .dev/s80/cache*.tar.xz; do tar -C .dev/cache80 -xJf $a; done
export CHORD_CACHE_DIR=$(pwd)/.dev/cache80
date -u; nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
for s in ep8_43 tp8_8192; do
  timeout 200 ncu --clock-control none --profile-from-start off --kernel-name chord_indexed_wgmma --launch-skip 1 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section SourceCounters \
    --section InstructionStats --import-source no -o $OUT/$s python3 .dev/s80/ncu_layer.py $s 2>&1 | grep -v "^==PROF==\|Warning" | tail -3
  ncu --import $OUT/$s.ncu-rep --page details --print-units base > $OUT/$s.txt 2>&1
  ncu --import $OUT/$s.ncu-rep --page source --print-source sass --csv > $OUT/${s}_sass.csv 2>&1
  xz -9 $OUT/${s}_sass.csv; rm -f $OUT/$s.ncu-rep
  grep -E "Duration|DRAM Throughput|Compute \(SM\)|Stall|Issue Slots|L2 Cache Throughput" $OUT/$s.txt | head -30
done
ls -la $OUT; date -u
