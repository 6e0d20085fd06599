set -x
tar -C .dev -xJf .dev/cache43e.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache43
source .dev/env.sh
git log --oneline -1; git status --short | head -14; date -u
(cd packages/chord-kernels && timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_grouped_gpu.py 2>&1 | tail -3) | tee $OUT/gpu_grouped_g.log
(cd packages/chord-bench && timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu.py 2>&1 | tail -2) | tee $OUT/gpu_bench_g.log
date -u
