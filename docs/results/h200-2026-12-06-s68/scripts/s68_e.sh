# Session 68 call e: the rest of chord-kernels' GPU files on main 1e02798 (indexed, SiLU-and-mul, top-k sum, split
# tail, subnormal, routing, dequantization), then the routing block at 120-150 rows per expert with the prefetching
# one-block items against the planned wide items (blocks_ab.py, TP8 and EP8).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache68
mkdir -p .dev/cache68; tar -C .dev/cache68 -xJf .dev/s68/cache68.tar.xz
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv,noheader
(cd packages/chord-kernels && timeout ${TT:-330} python3 -m pytest -q -m gpu -p no:cacheprovider -rf -n 2 --durations=5 tests/test_indexed_gpu.py tests/test_indexed_silu_mul_gpu.py tests/test_indexed_topk_sum_gpu.py tests/test_indexed_split_tail_gpu.py tests/test_subnormal_gpu.py tests/test_routing_gpu.py tests/test_dequant_gpu.py > $OUT/tests.log 2>&1
 echo "tests rc=$? $(tail -1 $OUT/tests.log)"; grep -E "^FAILED|^ERROR" $OUT/tests.log | cut -c1-200 | head -8)
date -u
BLOCKS=24,80,88,96 TAG=_tp8 timeout ${LT:-100} python3 .dev/s68/blocks_ab.py time 5800,6144,6600,7200 2>&1 | grep -v Warning
EP=1 BLOCKS=16,72,80 TAG=_ep8 timeout ${LT:-100} python3 .dev/s68/blocks_ab.py time 5808,6144,6528 2>&1 | grep -v Warning
date -u
