# Session 69 call d: the weights' L2 policy and streaming output stores (l2_exp.patch applied, then reversed):
# l2_ab.py on TP8's down at 4096 / 8192 / 12288 tokens, TP8 8192's gate_up, EP8's down at 128 and 341 rows per expert.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
mkdir -p .dev/cache69x; tar -C .dev/cache69x -xJf .dev/s69/cache69x.tar.xz; export CHORD_CACHE_DIR=$(pwd)/.dev/cache69x
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv,noheader
git apply .dev/s69/l2_exp.patch || exit
timeout ${AT:-400} python3 .dev/s69/l2_ab.py time ${SHAPES:-tp8192_down,ep341_down,tp4096_down,tp12288_down,tp8192_gate_up,ep128_down} 2>&1 | grep -v Warning
git apply -R .dev/s69/l2_exp.patch
date -u
