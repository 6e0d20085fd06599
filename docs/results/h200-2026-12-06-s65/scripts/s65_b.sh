# Session 65 call b: w16_ab.py (the 16 x 10 items against the planned 24 x 7) on the device; ARGS: rows per expert.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache63 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
tar -C .dev -xJf .dev/s63/cache63.tar.xz; tar -C .dev/cache63 -xJf .dev/s63/cache63b.tar.xz; tar -C .dev/cache63 -xJf .dev/s64/cache64.tar.xz
for f in .dev/s65/cache*.tar.xz; do tar -C .dev/cache63 -xJf $f; done
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv,noheader
timeout ${T:-400} python3 docs/results/h200-2026-12-06-s65/scripts/${S:-w16_ab.py} time $ARGS 2>&1 | tee $OUT/ab.log | grep -v Warning
date -u
