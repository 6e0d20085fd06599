set -x
mkdir -p .dev/cache45i && tar -C .dev -xJf .dev/cache45i.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache45i
source .dev/env.sh
date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
(cd packages/chord-kernels && timeout 100 python3 -m pytest -m gpu -q -x -p no:cacheprovider tests/test_grouped_gpu.py 2>&1 | tail -2) | tee $OUT/gpu_grouped_i.log
OUT=$OUT timeout 90 python3 .dev/s45/route_ab.py 2>&1 | tee $OUT/route_ab_i.log
date -u
(cd packages/chord-kernels && timeout 240 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -3) | tee $OUT/gpu_kernels_i.log
(cd packages/chord-bench && timeout 90 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -2) | tee $OUT/gpu_bench_i.log
(cd packages/chord-vllm && timeout 50 python3 -m pytest -q -p no:cacheprovider tests/test_core.py 2>&1 | tail -2) | tee $OUT/gpu_vllm_i.log
date -u
timeout 70 python3 -m chord_bench --quick --scenarios ep8_tok341 ep8_contig128 ep8_contig256 ep8_contig512 ep8_tok128 --impls chord-indexed,chord-grouped --peer humming-kernels --no-plot --out $OUT/bench_i 2>&1 | tail -7 | cut -c1-300
date -u
