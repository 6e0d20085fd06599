set -x
tar -C .dev -xJf .dev/cache29.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache29
source .dev/env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
python3 .dev/s29/split_ab.py precompile 16 2>&1 | tail -1
(cd packages/chord-kernels && timeout 240 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_indexed_wgmma_gpu.py -k "split_tail or graph" 2>&1 | tail -6) | tee $OUT/tests_split.log
ROUNDS=7 timeout 280 python3 .dev/s29/split_ab.py time 2>&1 | tee $OUT/split_ab.log
