set -x
tar -C .dev -xJf .dev/cache44b.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache43
source .dev/env.sh
git status --short | head; date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
(cd packages/chord-kernels && timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -3) | tee $OUT/gpu_kernels_c.log
(cd packages/chord-bench && timeout 100 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -2) | tee $OUT/gpu_bench_c.log
(cd packages/chord-vllm && timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_core.py 2>&1 | tail -2) | tee $OUT/gpu_vllm_c.log
date -u
timeout 150 python3 -m chord_bench --quick --scenarios ep8_tok16 ep8_tok43 ep8_tok128 ep8_tok341 tp8_1024 tp8_8192 --impls chord-indexed --peer humming-kernels --no-plot --out $OUT/bench_c 2>&1 | tail -9
date -u
