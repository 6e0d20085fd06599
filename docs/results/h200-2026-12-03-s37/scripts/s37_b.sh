set -x
tar -C .dev -xJf .dev/cache37b.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache37b
source .dev/env.sh
git log --oneline -1; git status --short | head -8; date -u
timeout 120 python3 .dev/s37/ab.py rwg time 2>&1 | tail -14
date -u
timeout 240 python3 .dev/s37/layer_rwg.py time 2>&1 | tail -34
date -u
(cd packages/chord-kernels && timeout 260 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -4) | tee $OUT/gpu_kernels.log
(cd packages/chord-vllm && timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_core.py 2>&1 | tail -1) | tee $OUT/gpu_vllm.log
date -u
