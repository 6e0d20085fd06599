set -x
tar -C .dev -xJf .dev/cache37c.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache37c
source .dev/env.sh
git log --oneline -1; git status --short | head -8; date -u
timeout 100 python3 .dev/s37/sanitize_rwg.py 2>&1 | tail -3
timeout 120 compute-sanitizer --tool memcheck python3 .dev/s37/sanitize_rwg.py 2>&1 | grep -v 'Host Frame' | tail -6 | tee $OUT/memcheck_rwg.log
timeout 150 compute-sanitizer --tool racecheck python3 .dev/s37/sanitize_rwg.py > $OUT/racecheck_rwg_full.log 2>&1; grep -c 'Race reported' $OUT/racecheck_rwg_full.log; grep 'wgmma.cuh\|ptx.cuh' $OUT/racecheck_rwg_full.log | sed 's/.*in \([a-z_]*\.cuh:[0-9]*\).*/\1/' | sort | uniq -c; tail -2 $OUT/racecheck_rwg_full.log
date -u
timeout 170 python3 -m chord_bench --quick --scenarios ep8_tok43 tp8_1024 --impls chord-indexed --peer humming-kernels --no-plot --max-minutes 3 --out $OUT/gemm 2>&1 | grep -v "^wrote" | tail -6
date -u
timeout 120 python3 -m chord_bench --quick --scenarios ep8_masked32 --impls chord-grouped --peer humming-kernels --no-plot --max-minutes 2 --out $OUT/grouped 2>&1 | grep -v "^wrote" | tail -5
date -u
timeout 150 python3 -m chord_bench.layer --rounds 9 --scenarios tp8_1024 ep8_tok43 ep8_masked32 --out $OUT/layer 2>&1 | grep -v "^wrote" | tail -8
date -u
