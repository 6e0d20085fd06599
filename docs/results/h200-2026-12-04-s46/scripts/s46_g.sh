set -x
mkdir -p .dev/cache46 && tar -C .dev -xJf .dev/cache46.tar.xz && tar -C .dev -xJf .dev/cache46w16.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache46
source .dev/env.sh
date -u
(cd packages/chord-kernels && timeout 260 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -3) | tee $OUT/gpu_kernels_g.log
(cd packages/chord-bench && timeout 80 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -2) | tee $OUT/gpu_bench_g.log
(cd packages/chord-vllm && timeout 45 python3 -m pytest -q -p no:cacheprovider tests/test_core.py 2>&1 | tail -2) | tee $OUT/gpu_vllm_g.log
date -u
