# Session 68 call b: (1) the 48- and 56-token gate_up items on two stages, with and without the prefetch, against
# their planned three (stages_ab.py); (2) the GPU tests of the tree with the launch facts computed once and the
# 72-token items prefetching: test_indexed_wgmma_gpu.py whole, the CTA pairs, the grouped modes.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache68
mkdir -p .dev/cache68; tar -C .dev/cache68 -xJf .dev/s68/cache68.tar.xz; touch /tmp/cache_marker
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv,noheader
timeout ${AT:-120} python3 .dev/s68/stages_ab.py time 2>&1 | grep -v Warning
date -u
(cd packages/chord-kernels && timeout ${TT:-400} python3 -m pytest -q -m gpu -p no:cacheprovider -rf -n 4 --durations=5 tests/test_indexed_wgmma_gpu.py tests/test_indexed_cta_pair_gpu.py tests/test_grouped_gpu.py > $OUT/tests.log 2>&1
 echo "tests rc=$? $(tail -1 $OUT/tests.log)"; grep -E "^FAILED|^ERROR" $OUT/tests.log | cut -c1-200 | head -8)
date -u
(cd .dev/cache68 && find . -type f -newer /tmp/cache_marker ! -name '*.lock' | tar -cJf $OUT/cache68_device.tar.xz -T -); ls -la $OUT/cache68_device.tar.xz
