# Session 51 call b1: every GPU test of the branch tree (rebased on main 6e1b326).
set -x
tar -C .dev -xJf .dev/cache48.tar.xz; tar -C .dev -xJf .dev/cache48b_extra.tar.xz; tar -C .dev -xJf .dev/s48/cache50_extra.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache48
source .dev/env.sh
date -u
(cd packages/chord-kernels && timeout 330 python3 -m pytest -v -m gpu tests -p no:cacheprovider > $OUT/gpu_kernels_b.log 2>&1; echo kernels rc=$?)
date -u
(cd packages/chord-vllm && timeout 150 python3 -m pytest -v -p no:cacheprovider tests/test_core.py > $OUT/gpu_vllm_b.log 2>&1; echo vllm rc=$?)
(cd packages/chord-bench && timeout 120 python3 -m pytest -q -m gpu tests -p no:cacheprovider > $OUT/gpu_bench_b.log 2>&1; echo bench rc=$?)
date -u
tail -3 $OUT/gpu_kernels_b.log; grep -E "FAILED|ERROR" $OUT/gpu_kernels_b.log | head; tail -3 $OUT/gpu_vllm_b.log; tail -3 $OUT/gpu_bench_b.log
tail -3 $OUT/gpu_kernels_b.log; grep -E "FAILED|ERROR" $OUT/gpu_kernels_b.log | head; tail -3 $OUT/gpu_vllm_b.log; tail -3 $OUT/gpu_bench_b.log
grep -E "prepare_layer_loads|nothing_to_compile|host_without_a_gpu|moe_experts" $OUT/gpu_kernels_b.log $OUT/gpu_vllm_b.log
