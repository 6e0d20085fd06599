set -x
tar -C .dev -xJf .dev/cache42c.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache42
source .dev/env.sh
date -u
timeout 100 compute-sanitizer --tool memcheck python3 .dev/s42/sanitize_three.py > $OUT/memcheck_three_full.log 2>&1; grep -v 'Host Frame' $OUT/memcheck_three_full.log | head -40; tail -3 $OUT/memcheck_three_full.log
CONSUMERS=2 timeout 100 compute-sanitizer --tool memcheck python3 .dev/s42/sanitize_three.py > $OUT/memcheck_two_full.log 2>&1; tail -3 $OUT/memcheck_two_full.log
date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
mkdir -p $OUT/bench $OUT/bench_grouped $OUT/layer
timeout 150 python3 -m chord_bench --quick --scenarios ep8_tok16 ep8_tok43 tp8_1024 --impls chord-indexed --peer humming-kernels --no-plot --out $OUT/bench 2>&1 | tail -6
date -u
timeout 150 python3 -m chord_bench --quick --scenarios ep8_masked8 ep8_masked16 ep8_masked32 --impls chord-grouped --peer humming-kernels --no-plot --out $OUT/bench_grouped 2>&1 | tail -6
date -u
timeout 150 python3 -m chord_bench.layer --rounds 9 --scenarios ep8_tok12 ep8_masked16 ep8_masked16_cap2048 --out $OUT/layer 2>&1 | grep -v "^wrote" | tail -8
date -u
