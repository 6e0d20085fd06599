# Session 51 call b2: compute-sanitizer on the four-warpgroup runs.
set -x
tar -C .dev -xJf .dev/cache48.tar.xz; tar -C .dev -xJf .dev/cache48b_extra.tar.xz; tar -C .dev -xJf .dev/s48/cache50_extra.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache48
source .dev/env.sh
grep -E "prepare_layer_loads|nothing_to_compile" $OUT/gpu_kernels_b.log $OUT/gpu_vllm_b.log
timeout 60 python3 .dev/s48/sanitize_runs4.py 2>&1 | tail -2
timeout 100 compute-sanitizer --tool memcheck python3 .dev/s48/sanitize_runs4.py 2>&1 | grep -v 'Host Frame' | tail -6 | tee $OUT/memcheck_runs4_b.log
timeout 120 compute-sanitizer --tool racecheck python3 .dev/s48/sanitize_runs4.py > $OUT/racecheck_runs4_b.log 2>&1; grep -c 'Race reported' $OUT/racecheck_runs4_b.log; tail -2 $OUT/racecheck_runs4_b.log
date -u
