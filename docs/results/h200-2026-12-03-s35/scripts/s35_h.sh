set -x
tar -C .dev -xJf .dev/cache35b.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache35b
source .dev/env.sh
git log --oneline -1; git status --short | head -3; date -u
(cd packages/chord-kernels && timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -4) | tee $OUT/gpu_kernels.log
(cd packages/chord-vllm && timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_core.py 2>&1 | tail -2) | tee $OUT/gpu_vllm.log
date -u
timeout 60 compute-sanitizer --tool memcheck python3 .dev/s35/sanitize_silu.py 2>&1 | grep -v 'Host Frame' | tail -8 | tee $OUT/memcheck_silu.log
timeout 80 compute-sanitizer --tool racecheck python3 .dev/s35/sanitize_silu.py > $OUT/racecheck_silu_full.log 2>&1; grep -c 'Race reported' $OUT/racecheck_silu_full.log; grep 'Race reported\|decode.cuh\|epilogue.cuh' $OUT/racecheck_silu_full.log | sed 's/.*in \([a-z_]*\.cuh:[0-9]*\).*/\1/' | sort | uniq -c; tail -3 $OUT/racecheck_silu_full.log
date -u
timeout 60 python3 -m chord_bench.layer --rounds 9 --scenarios ep8_tok5 --out $OUT/layer 2>&1 | grep -v "^wrote" | tail -4
date -u
