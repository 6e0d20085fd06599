set -x
tar -C .dev -xJf .dev/cache36h.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache36h
source .dev/env.sh
git log --oneline -2; git status --short | head -8; date -u
timeout 60 compute-sanitizer --tool memcheck python3 .dev/s36/sanitize_dyn.py 2>&1 | grep -v 'Host Frame' | tail -8 | tee $OUT/memcheck_dyn.log
timeout 90 compute-sanitizer --tool racecheck python3 .dev/s36/sanitize_dyn.py > $OUT/racecheck_dyn_full.log 2>&1; grep -c 'Race reported' $OUT/racecheck_dyn_full.log; grep 'Race reported\|decode.cuh\|epilogue.cuh\|scheduler.cuh' $OUT/racecheck_dyn_full.log | sed 's/.*in \([a-z_]*\.cuh:[0-9]*\).*/\1/' | sort | uniq -c; tail -3 $OUT/racecheck_dyn_full.log
date -u
timeout 120 python3 -m chord_bench.layer --rounds 9 --scenarios tp8_1024 tp8_512 --out $OUT/layer 2>&1 | grep -v "^wrote" | tail -6
date -u
(cd packages/chord-bench && timeout 80 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -1) | tee $OUT/gpu_bench.log
date -u
