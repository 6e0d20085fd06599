set -x
tar -C .dev -xJf .dev/cache34.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache34
source .dev/env.sh
git log --oneline -1; date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
ROUNDS=7 OUT=$OUT timeout 170 python3 .dev/s34/ab.py tp8dn time 2>&1 | tee $OUT/tp8dn_ab.log
ROUNDS=7 OUT=$OUT timeout 170 python3 .dev/s34/ab.py sched time 2>&1 | tee $OUT/sched_ab.log
ROUNDS=7 OUT=$OUT timeout 200 python3 .dev/s34/layer_blk.py a time 2>&1 | tee $OUT/layer_blk.log
date -u
