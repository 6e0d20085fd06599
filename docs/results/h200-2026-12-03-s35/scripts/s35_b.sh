set -x
tar -C .dev -xJf .dev/cache35.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache35
source .dev/env.sh
git log --oneline -1; date -u
(cd packages/chord-kernels && timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_indexed_gpu.py -k "row_widths" 2>&1 | tail -5) | tee $OUT/tests_rw.log
ROUNDS=7 OUT=$OUT timeout 400 python3 .dev/s35/ab.py rw time 2>&1 | tee $OUT/rw_ab.log
date -u
