# Session 62 call c: the one-block items of 72-104 tokens on whole stages with the pairs shifted (shift_ab.py).
# Kernels: .dev/s62/cache62.tar.xz + cache62b.tar.xz (the variants, compiled here).
export PYTHONPATH=$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache62 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
tar -C .dev -xJf .dev/s62/cache62.tar.xz; tar -C .dev -xJf .dev/s62/cache62b.tar.xz
date -u; nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader

timeout 130 python3 .dev/s62/shift_ab.py time ${CASES:-tp8_8192,ep8_171,ep8_72} > $OUT/shift_ab.log 2>&1; echo ab rc=$?
date -u; tail -12 $OUT/shift_ab.log
