# Session 67 call f: the next stage's rows prefetched into L2 (prefetch.global.L2 per 128-byte line, 1 and 2 stages
# ahead) on the plan as it is, across TP8 token counts and EP8 64 rows per expert.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache67f PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
mkdir -p .dev/cache67f; tar -C .dev/cache67f -xJf .dev/s67/cache67p.tar.xz
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv,noheader
PREFETCH=1 timeout ${T:-300} python3 .dev/s67/exp_ab.py time ${SHAPES:-tp8192,tp1024,tp2048,tp4096,tp6144,tp12288,ep64} 2>&1 | grep -v Warning
date -u
