set -x
tar -C .dev -xJf .dev/cache39t.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache39t
source .dev/env.sh
git log --oneline -1; git status --short | head -8; date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
OUT=$OUT timeout 120 python3 .dev/s39/ab.py gu16 time 2>&1 | tail -14
date -u
date -u
date -u
OUT=$OUT timeout 300 python3 .dev/s39/layer_ab.py d16 time 2>&1 | tail -30
date -u
mkdir -p $OUT/bench_d16
timeout 150 python3 -c "
import sys, runpy
import chord_kernels.indexed.planner as P
P.DECODE_BLOCK16_MAX_TOK_E = 9.0
sys.argv = ['chord_bench', '--quick', '--scenarios', 'ep8_masked8', '--impls', 'chord-grouped', '--peer', 'humming-kernels', '--no-plot', '--out', '$OUT/bench_d16']
runpy.run_module('chord_bench', run_name='__main__')
" 2>&1 | tail -6
date -u
