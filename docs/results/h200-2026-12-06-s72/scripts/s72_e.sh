# Session 72 call e (branch s72-pp4; carry [".dev/s72", ".whl"]): call c's A/B alone at three token counts (the last
# device seconds).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
mkdir -p .dev/cache72p && tar -C .dev/cache72p -xJf .dev/s72/cache_pp4.tar.xz; export CHORD_CACHE_DIR=$(pwd)/.dev/cache72p
date -u; nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader; git log --oneline -1
ROUNDS=3 timeout ${AT:-100} python3 .dev/s72/pp4_ab.py time ${TOK:-8192,1024,4096} 2>&1 | grep -v Warning | tee $OUT/pp4_ab.log | tail -n 5
cp $OUT/pp4_ab.log /dev/null; date -u
