# Session 68 call c: the GPU tests of the tree (launch facts computed once, 72-token items prefetching):
# test_indexed_wgmma_gpu.py whole, the CTA pairs, the grouped modes, two workers (call b's four ran out of memory);
# then the layer at 72-token routing blocks with and without the prefetch (layer72_ab.py).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache68
mkdir -p .dev/cache68; tar -C .dev/cache68 -xJf .dev/s68/cache68.tar.xz; touch /tmp/cache_marker
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv,noheader
(cd packages/chord-kernels && timeout ${TT:-380} python3 -m pytest -q -m gpu -p no:cacheprovider -rf -n 2 --durations=5 tests/test_indexed_wgmma_gpu.py tests/test_indexed_cta_pair_gpu.py tests/test_grouped_gpu.py > $OUT/tests.log 2>&1
 echo "tests rc=$? $(tail -1 $OUT/tests.log)"; grep -E "^FAILED|^ERROR" $OUT/tests.log | cut -c1-200 | head -8)
date -u
timeout ${LT:-150} python3 .dev/s68/layer72_ab.py time 2>&1 | grep -v Warning
date -u
(cd .dev/cache68 && find . -type f -newer /tmp/cache_marker ! -name '*.lock' | tar -cJf $OUT/cache68_device.tar.xz -T -); ls -la $OUT/cache68_device.tar.xz
