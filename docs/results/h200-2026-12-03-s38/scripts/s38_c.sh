set -x
tar -C .dev -xJf .dev/cache38b.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache38b
source .dev/env.sh
git log --oneline -1; git status --short | head -8; date -u
OUT=$OUT timeout 60 python3 .dev/s38/layer_ab.py thr time 2>&1 | tail -8
date -u
(cd packages/chord-kernels && timeout 240 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -2) | tee $OUT/gpu_kernels.log
(cd packages/chord-vllm && timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_core.py 2>&1 | tail -1) | tee $OUT/gpu_vllm.log
(cd packages/chord-bench && timeout 120 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -1) | tee $OUT/gpu_bench.log
date -u
