set -x
tar -C .dev -xJf .dev/cache35.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache35
source .dev/env.sh
git log --oneline -1; date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
(cd packages/chord-kernels && timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_indexed_gpu.py -k "half_k or tp8_down or wide_bm32 or bm64_k256" 2>&1 | tail -5) | tee $OUT/tests_half_k.log
ROUNDS=7 OUT=$OUT timeout 300 python3 .dev/s35/ab.py halfk time 2>&1 | tee $OUT/halfk_ab.log
date -u
