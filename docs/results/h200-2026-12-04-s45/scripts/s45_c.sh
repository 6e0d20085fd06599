set -x
tar -C .dev -xJf .dev/cache44b.tar.xz
tar -C .dev -xJf .dev/cache45a_extra.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache43
source .dev/env.sh
date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
python3 .dev/s45/l2_ab.py precompile 16 2>&1 | tail -1
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader -lms 250 > $OUT/clocks_c.log & SAMPLER=$!
OUT=$OUT REPS=5 ROUNDS=11 timeout 450 python3 .dev/s45/l2_ab.py time ep8_tok341,tp8_8192,contig256,contig512 2>&1 | tee $OUT/l2_ab_c.log
kill $SAMPLER
date -u
