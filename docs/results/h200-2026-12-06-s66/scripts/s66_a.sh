# Session 66: an A/B script (S=gather_ab.py by default; ARGS: shapes) on the device.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/${C:-cache66} PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv,noheader
timeout ${T:-400} python3 docs/results/h200-2026-12-06-s66/scripts/${S:-gather_ab.py} time $ARGS 2>&1 | tee $OUT/ab.log | grep -v Warning
date -u
