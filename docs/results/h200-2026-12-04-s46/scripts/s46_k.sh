set -x
mkdir -p .dev/cache46r && tar -C .dev -xJf .dev/cache46r.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache46r
source .dev/env.sh
date -u
(cd packages/chord-bench && timeout 60 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -2) | tee $OUT/gpu_bench_k.log
(cd packages/chord-vllm && timeout 40 python3 -m pytest -q -p no:cacheprovider tests/test_core.py 2>&1 | tail -2) | tee $OUT/gpu_vllm_k.log
(cd packages/chord-kernels && timeout 240 python3 -m pytest -m gpu -v -p no:cacheprovider tests > $OUT/gpu_kernels_k.log 2>&1; tail -2 $OUT/gpu_kernels_k.log; grep -c PASSED $OUT/gpu_kernels_k.log; grep -c "FAILED\|ERROR" $OUT/gpu_kernels_k.log)
date -u
