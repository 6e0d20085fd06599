# Session 67 call a: the GPU evidence session 66 left out — chord-kernels GPU files not run on 21713ed+ (two
# workers), then compute-sanitizer memcheck and racecheck on the CTA pairs (sanitize_pair.py).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache67 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
mkdir -p .dev/cache67; tar -C .dev/cache67 -xJf .dev/s66/cache66.tar.xz
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv,noheader
S=$(pwd)/.dev/s67
timeout 90 python3 $S/sanitize_pair.py 2>&1 | tail -3
(cd packages/chord-kernels && timeout ${T:-330} python3 -m pytest -q -m gpu -p no:cacheprovider -rf -n 2 --durations=8 tests/test_indexed_cta_pair_gpu.py tests/test_indexed_gpu.py tests/test_indexed_silu_mul_gpu.py tests/test_subnormal_gpu.py tests/test_indexed_topk_sum_gpu.py tests/test_indexed_split_tail_gpu.py tests/test_routing_gpu.py tests/test_dequant_gpu.py > $OUT/tests.log 2>&1
 echo "tests rc=$? $(tail -1 $OUT/tests.log)"; grep -E "^FAILED|^ERROR" $OUT/tests.log | cut -c1-200 | head -12; grep -E "^[.FEsx]+ +\[ *[0-9]+%\]" $OUT/tests.log | tail -1)
date -u
timeout 60 compute-sanitizer --tool memcheck python3 $S/sanitize_pair.py > $OUT/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -v 'Host Frame' $OUT/memcheck.log | tail -4
timeout 100 compute-sanitizer --tool racecheck --racecheck-report hazard python3 $S/sanitize_pair.py > $OUT/racecheck.log 2>&1; echo "racecheck rc=$?"
grep -c 'hazard' $OUT/racecheck.log; grep -o '[a-z_]*\.cuh:[0-9]*' $OUT/racecheck.log | sort | uniq -c | head; tail -3 $OUT/racecheck.log
date -u
