mkdir -p .dev/cache47 && tar -C .dev -xJf .dev/cache46r.tar.xz && mv .dev/cache46r/* .dev/cache47/ 2>/dev/null; tar -C .dev -xJf .dev/cache47c_extra.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache47
source .dev/env.sh
date -u
(cd packages/chord-kernels && timeout 330 python3 -m pytest -v -m gpu tests -p no:cacheprovider > $OUT/gpu_kernels_d.log 2>&1; echo kernels rc=$?)
date -u
(cd packages/chord-vllm && timeout 40 python3 -m pytest -q -p no:cacheprovider tests/test_core.py > $OUT/gpu_vllm_d.log 2>&1; echo vllm rc=$?)
(cd packages/chord-bench && timeout 120 python3 -m pytest -q -m gpu tests -p no:cacheprovider > $OUT/gpu_bench_d.log 2>&1; echo bench rc=$?)
date -u
tail -3 $OUT/gpu_kernels_d.log; tail -3 $OUT/gpu_vllm_d.log; tail -3 $OUT/gpu_bench_d.log
