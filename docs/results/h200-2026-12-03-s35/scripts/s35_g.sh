set -x
tar -C .dev -xJf .dev/cache35b.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache35b
source .dev/env.sh
git log --oneline -1; date -u
(cd packages/chord-kernels && timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_indexed_silu_mul_gpu.py 2>&1 | tail -3) | tee $OUT/silu_gpu.log
ROUNDS=7 OUT=$OUT timeout 100 python3 .dev/s35/ab.py gusilu time 2>&1 | tee $OUT/gusilu_ab.log
ROUNDS=7 OUT=$OUT timeout 200 python3 .dev/s35/layer_rw.py time fused 2>&1 | tee $OUT/layer_rw_fused.log
date -u
