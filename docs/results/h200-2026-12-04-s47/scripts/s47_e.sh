set -x
mkdir -p .dev/cache47 && tar -C .dev -xJf .dev/cache46r.tar.xz && mv .dev/cache46r/* .dev/cache47/ 2>/dev/null; tar -C .dev -xJf .dev/cache47c_extra.tar.xz; tar -C .dev -xJf .dev/cache47e_extra.tar.xz; tar -C .dev -xJf .dev/cache47f_extra.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache47
source .dev/env.sh
date -u
OUT=$OUT ROUNDS=5 timeout 120 python3 .dev/s47/stages_ab.py time 2>&1 | tee $OUT/stages_ab_e.log
date -u
(cd packages/chord-kernels && timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_indexed_topk_sum_gpu.py 2>&1 | tail -3) | tee $OUT/gpu_topk_sum_e.log
date -u
timeout 60 python3 .dev/s47/sanitize_runs4.py 2>&1 | tail -2
timeout 150 compute-sanitizer --tool memcheck python3 .dev/s47/sanitize_runs4.py 2>&1 | grep -v 'Host Frame' | tail -6 | tee $OUT/memcheck_runs4_e.log
timeout 240 compute-sanitizer --tool racecheck python3 .dev/s47/sanitize_runs4.py > $OUT/racecheck_runs4_e.log 2>&1; grep -c 'Race reported' $OUT/racecheck_runs4_e.log; grep 'wgmma.cuh\|ptx.cuh\|epilogue.cuh\|routing.cuh' $OUT/racecheck_runs4_e.log | sed 's/.*in \([a-z_]*\.cuh:[0-9]*\).*/\1/' | sort | uniq -c; tail -2 $OUT/racecheck_runs4_e.log
date -u
