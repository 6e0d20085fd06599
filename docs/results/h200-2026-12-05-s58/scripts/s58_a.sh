# Session 58 call a: session 57's final code (main d4672a2, kernels = cache57) through every GPU test of the
# tree on one process (chord-kernels -m gpu, chord-vllm test_core.py, chord-bench -m gpu), then the pair's A/B.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
set -x
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src:$(pwd)/packages/chord-vllm/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache57
mkdir -p $CHORD_CACHE_DIR
[ -f .dev/s57/cache57.tar.xz ] && tar -C .dev -xJf .dev/s57/cache57.tar.xz
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv
(cd packages/chord-kernels && timeout 400 python3 -m pytest -v -m gpu tests -p no:cacheprovider --durations=15 > $OUT/gpu_kernels.log 2>&1; echo kernels rc=$?)
date -u
(cd packages/chord-vllm && timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_core.py > $OUT/gpu_vllm.log 2>&1; echo vllm rc=$?)
(cd packages/chord-bench && timeout 60 python3 -m pytest -q -m gpu tests -p no:cacheprovider > $OUT/gpu_bench.log 2>&1; echo bench rc=$?)
date -u
timeout 90 python3 ci/contiguous_pair_ab.py --seeds 0 --out $OUT/ab > $OUT/ab.log 2>&1; echo ab rc=$?
date -u
grep -E "FAILED|^ERROR" $OUT/gpu_kernels.log | cut -c1-200 | head -20
tail -2 $OUT/gpu_kernels.log; tail -2 $OUT/gpu_vllm.log; tail -2 $OUT/gpu_bench.log
grep -v "^$" $OUT/ab.log | cut -c1-260 | tail -14
