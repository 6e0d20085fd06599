set -x
tar -C .dev -xJf .dev/cache30b.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache30b
source .dev/env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
.dev/s30/subnormal_exhaustive | tee $OUT/subnormal_exhaustive_final.log
ROUNDS=7 OUT=$OUT timeout 200 python3 .dev/s30/ab.py subdec time 2>&1 | tee $OUT/subdec_ab.log
(cd packages/chord-kernels && timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -6) | tee $OUT/gpu_kernels.log
