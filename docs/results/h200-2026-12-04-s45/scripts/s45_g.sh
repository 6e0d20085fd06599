set -x
mkdir -p .dev/cache45 && tar -C .dev -xJf .dev/cache45.tar.xz && tar -C .dev -xJf .dev/cache45g_extra.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache45
source .dev/env.sh
date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
L2_VARIANTS=wF python3 .dev/s45/l2_ab.py precompile 16 2>&1 | tail -1
L2_VARIANTS=wF OUT=$OUT REPS=5 ROUNDS=11 timeout 400 python3 .dev/s45/l2_ab.py time ep8_tok16,ep8_tok43,contig256,ep8_tok341 2>&1 | tee $OUT/l2_ab_g.log
date -u
