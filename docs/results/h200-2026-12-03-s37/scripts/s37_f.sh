set -x
tar -C .dev -xJf .dev/cache37f.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache37f
source .dev/env.sh
git log --oneline -1; git status --short | head -8; date -u
timeout 200 python3 -m chord_bench.layer --rounds 9 --scenarios ep8_tok48 ep8_masked48 tp8_2304 --out $OUT/layer 2>&1 | grep -v "^wrote" | tail -8
date -u
