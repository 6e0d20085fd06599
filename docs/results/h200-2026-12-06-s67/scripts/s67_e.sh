# Session 67 call e: the gathers' L2 side (exp_ab.py PREFETCH=1): the rows of a later stage prefetched into L2 per
# 128-byte line (prefetch.global.L2, 1 and 2 stages ahead), cp.async with a 256-byte L2 prefetch, and the
# activations' L2 policy evict_first / evict_normal instead of evict_last.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache67e PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
mkdir -p .dev/cache67e; tar -C .dev/cache67e -xJf .dev/s67/cache67p.tar.xz
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv,noheader
PREFETCH=1 timeout ${T:-300} python3 .dev/s67/exp_ab.py time ${SHAPES:-tp8192,ep64,ep43,ep341,ep128} 2>&1 | grep -v Warning
date -u
