set -x
tar -C .dev -xJf .dev/cache36h.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache36h
source .dev/env.sh
git status --short | head -8; date -u
timeout 150 python3 .dev/s36/layer_dyn.py time 2>&1 | tail -9
date -u
timeout 100 python3 .dev/s36/masked_gu.py time 2>&1 | tail -8
date -u
timeout 100 python3 -m chord_bench --quick --scenarios tp8_1024 --impls chord-indexed --peer humming-kernels --no-plot --max-minutes 2 --out $OUT/gemm 2>&1 | grep -v "^wrote" | tail -4
date -u
(cd packages/chord-kernels && timeout 240 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -3) | tee $OUT/gpu_kernels.log
(cd packages/chord-vllm && timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_core.py 2>&1 | tail -1) | tee $OUT/gpu_vllm.log
date -u
