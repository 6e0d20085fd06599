set -x
tar -C .dev -xJf .dev/cache34.tar.xz
tar -C .dev -xJf .dev/cache34h.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache34
source .dev/env.sh
git status --short | head -4; date -u
(cd packages/chord-kernels && timeout 230 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -3) | tee $OUT/gpu_kernels.log
(cd packages/chord-vllm && timeout 40 python3 -m pytest -q -p no:cacheprovider tests/test_core.py 2>&1 | tail -1) | tee $OUT/gpu_vllm.log
date -u
timeout 60 python3 -m chord_bench.layer --rounds 9 --scenarios tp8_4096 --out $OUT/layer 2>&1 | grep -v "^wrote" | tail -3
(cd packages/chord-bench && timeout 75 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -1) | tee $OUT/gpu_bench.log
date -u
