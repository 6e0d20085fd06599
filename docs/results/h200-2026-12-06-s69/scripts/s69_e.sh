# Session 69 call e: the routing-order layer GPU tests with the new EP wide-items rule (tok_e_153), on main's kernels
# (session 68's cache); then the weights' L2 policy and streaming stores (l2_exp.patch applied, then reversed).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
mkdir -p .dev/cache68 .dev/cache69x; tar -C .dev/cache68 -xJf .dev/s68/cache68.tar.xz; tar -C .dev/cache69x -xJf .dev/s69/cache69x.tar.xz
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv,noheader
(cd packages/chord-kernels && CHORD_CACHE_DIR=$(pwd)/../../.dev/cache68 timeout ${TT:-150} python3 -m pytest -q -m gpu -n 2 -p no:cacheprovider -rf \
   tests/test_indexed_gpu.py -k "routing_order or prepare_layer" > $OUT/tests_e.log 2>&1; tail -3 $OUT/tests_e.log)
date -u
git apply .dev/s69/l2_exp.patch || exit
CHORD_CACHE_DIR=$(pwd)/.dev/cache69x timeout ${AT:-380} python3 .dev/s69/l2_ab.py time ${SHAPES:-tp8192_down,ep341_down,tp4096_down,tp12288_down,tp8192_gate_up,ep128_down} 2>&1 | grep -v Warning
git apply -R .dev/s69/l2_exp.patch
date -u
