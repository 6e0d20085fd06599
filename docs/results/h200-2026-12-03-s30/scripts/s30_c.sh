set -x
tar -C .dev -xJf .dev/cache30b.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache30b
source .dev/env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
(cd packages/chord-vllm && timeout 90 python3 -m pytest -q -p no:cacheprovider tests/test_core.py 2>&1 | tail -2) | tee $OUT/gpu_vllm.log
(cd packages/chord-bench && timeout 60 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -3) | tee $OUT/gpu_bench.log
timeout 230 python3 -m chord_bench --quick --scenarios ep8_tok16 ep8_tok43 tp8_1024 --impls chord-indexed --peer humming-kernels --no-plot --max-minutes 3 --out $OUT/gemm 2>&1 | tail -8
timeout 200 python3 -m chord_bench --quick --scenarios ep8_masked8 ep8_masked16 ep8_masked32 --impls chord-grouped --peer humming-kernels --no-plot --max-minutes 3 --out $OUT/grouped 2>&1 | tail -8
