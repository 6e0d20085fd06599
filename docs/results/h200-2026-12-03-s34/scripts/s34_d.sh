set -x
tar -C .dev -xJf .dev/cache34.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache34
source .dev/env.sh
git log --oneline -1; git status --short | head; date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
(cd packages/chord-kernels && timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -15) | tee $OUT/gpu_kernels.log
(cd packages/chord-vllm && timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_core.py 2>&1 | tail -2) | tee $OUT/gpu_vllm.log
date -u
ROUNDS=7 OUT=$OUT timeout 60 python3 .dev/s34/masked_blk.py d time 2>&1 | tee $OUT/masked_blk.log
timeout 150 python3 -m chord_bench.layer --rounds 9 --scenarios ep8_tok43 ep8_tok48 tp8_2304 ep8_masked48 --out $OUT/layer 2>&1 | tail -12
date -u
