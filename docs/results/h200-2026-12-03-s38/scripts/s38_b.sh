set -x
tar -C .dev -xJf .dev/cache38b.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache38b
source .dev/env.sh
git log --oneline -1; git status --short | head -8; date -u
OUT=$OUT timeout 120 python3 .dev/s38/layer_ab.py final time 2>&1 | tail -24
date -u
(cd packages/chord-kernels && timeout 240 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -4) | tee $OUT/gpu_kernels.log
(cd packages/chord-vllm && timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_core.py 2>&1 | tail -1) | tee $OUT/gpu_vllm.log
date -u
timeout 60 python3 .dev/s38/sanitize_runs.py 2>&1 | tail -3
timeout 90 compute-sanitizer --tool memcheck python3 .dev/s38/sanitize_runs.py 2>&1 | grep -v 'Host Frame' | tail -6 | tee $OUT/memcheck_runs.log
timeout 120 compute-sanitizer --tool racecheck python3 .dev/s38/sanitize_runs.py > $OUT/racecheck_runs_full.log 2>&1; grep -c 'Race reported' $OUT/racecheck_runs_full.log; grep 'wgmma.cuh\|ptx.cuh' $OUT/racecheck_runs_full.log | sed 's/.*in \([a-z_]*\.cuh:[0-9]*\).*/\1/' | sort | uniq -c; tail -2 $OUT/racecheck_runs_full.log
date -u
(cd packages/chord-bench && timeout 120 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -2) | tee $OUT/gpu_bench.log
date -u
timeout 200 python3 -m chord_bench.layer --rounds 9 --scenarios tp8_2304 --out $OUT/layer 2>&1 | grep -v "^wrote" | tail -8
date -u
