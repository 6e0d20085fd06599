set -x
tar -C .dev -xJf .dev/cache36h.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache36h
source .dev/env.sh
git log --oneline -1; git status --short | head -8; date -u
timeout 100 python3 .dev/s36/ab.py dyn time 2>&1 | tail -9
date -u
timeout 150 python3 -m chord_bench --quick --scenarios ep8_masked8 ep8_masked16 --impls chord-grouped --peer humming-kernels --no-plot --max-minutes 3 --out $OUT/gemm 2>&1 | grep -v "^wrote" | tail -14
date -u
(cd packages/chord-kernels && timeout 240 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -4) | tee $OUT/gpu_kernels.log
(cd packages/chord-vllm && timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_core.py 2>&1 | tail -2) | tee $OUT/gpu_vllm.log
(cd packages/chord-bench && timeout 80 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -2) | tee $OUT/gpu_bench.log
date -u
