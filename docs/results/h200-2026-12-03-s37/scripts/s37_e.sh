set -x
tar -C .dev -xJf .dev/cache37f.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache37f
source .dev/env.sh
git log --oneline -1; git status --short | head -8; date -u
(cd packages/chord-kernels && timeout 260 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -2) | tee $OUT/gpu_kernels.log
(cd packages/chord-vllm && timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_core.py 2>&1 | tail -1) | tee $OUT/gpu_vllm.log
(cd packages/chord-bench && timeout 100 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -1) | tee $OUT/gpu_bench.log
date -u
