set -x
tar -C .dev -xJf .dev/cache44b.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache43
source .dev/env.sh
git status --short | head; git diff HEAD --stat -- packages | tail -1; date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
(cd packages/chord-kernels && timeout 330 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -3) | tee $OUT/gpu_kernels_h.log
(cd packages/chord-bench && timeout 100 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -2) | tee $OUT/gpu_bench_h.log
(cd packages/chord-vllm && timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_core.py 2>&1 | tail -2) | tee $OUT/gpu_vllm_h.log
date -u
timeout 120 python3 -m chord_bench --quick --scenarios ep8_* tp8_* --impls chord-indexed,chord-grouped --peer humming-kernels --no-plot --out $OUT/bench_h 2>&1 | tail -17 | cut -c1-300
date -u
