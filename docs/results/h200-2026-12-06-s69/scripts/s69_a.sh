# Session 69 call a: ncu (--set full, clocks not controlled) of the layer's kernels at TP8 8192 tokens and EP8 128 / 43 rows per expert.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
mkdir -p .dev/cache68; tar -C .dev/cache68 -xJf .dev/s68/cache68.tar.xz; export CHORD_CACHE_DIR=$(pwd)/.dev/cache68
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv,noheader
for s in ${SHAPES:-tp8_8192 ep8_128 ep8_43}; do
  timeout 200 ncu --clock-control none --profile-from-start off --set full --import-source no -o $OUT/$s python3 .dev/s69/ncu_layer.py $s 2>&1 | grep -v "^==PROF==\|Warning" | tail -5
  ncu --import $OUT/$s.ncu-rep --page details --print-units base > $OUT/$s.txt 2>&1
  ncu --import $OUT/$s.ncu-rep --page raw --csv > $OUT/${s}_raw.csv 2>&1
  grep -E "^  [a-z_]+.*\(|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|L2 Cache Throughput|Executed Ipc Active|Issue Slots Busy|SM Busy|Registers Per|Achieved Occupancy|Block Size|Grid Size|Dynamic Shared" $OUT/$s.txt | head -80
  date -u
done
