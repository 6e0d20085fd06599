set -x
tar -C .dev -xJf .dev/cache43e.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache43
source .dev/env.sh
git log --oneline -1; git status --short | head -14; date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
(cd packages/chord-kernels && timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -8) | tee $OUT/gpu_kernels.log
date -u
(cd packages/chord-vllm && timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_core.py 2>&1 | tail -1) | tee $OUT/gpu_vllm.log
(cd packages/chord-bench && timeout 100 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -2) | tee $OUT/gpu_bench.log
date -u
timeout 60 python3 .dev/s43/sanitize_wide.py 2>&1 | tail -3
timeout 100 compute-sanitizer --tool memcheck python3 .dev/s43/sanitize_wide.py 2>&1 | grep -v 'Host Frame' | tail -6 | tee $OUT/memcheck_wide.log
timeout 150 compute-sanitizer --tool racecheck python3 .dev/s43/sanitize_wide.py > $OUT/racecheck_wide_full.log 2>&1; grep -c 'Race reported' $OUT/racecheck_wide_full.log; grep 'wgmma.cuh\|ptx.cuh\|epilogue.cuh\|topk_sum.cuh' $OUT/racecheck_wide_full.log | sed 's/.*in \([a-z_]*\.cuh:[0-9]*\).*/\1/' | sort | uniq -c; tail -2 $OUT/racecheck_wide_full.log
date -u
