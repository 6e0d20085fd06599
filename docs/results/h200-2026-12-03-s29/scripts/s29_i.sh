set -x
tar -C .dev -xJf .dev/cache29f.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache29f
source .dev/env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
python3 .dev/s29/whole16_ab.py precompile 16 2>&1 | tail -1
ROUNDS=7 timeout 200 python3 .dev/s29/whole16_ab.py time 2>&1 | tee $OUT/whole16_ab.log
python3 -m chord_bench --quick --scenarios ep8_masked8 --impls chord-grouped --peer humming-kernels --no-plot --max-minutes 2 --out $OUT/grouped 2>&1 | tail -6
python3 -m chord_bench.layer --rounds 9 --scenarios ep8_masked8 --out $OUT/layer 2>&1 | tail -5
