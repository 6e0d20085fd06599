set -x
tar -C .dev -xJf .dev/cache38b.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache38b
source .dev/env.sh
git log --oneline -1; git status --short | head -8; date -u
OUT=$OUT timeout 150 python3 .dev/s38/ab.py dec time 2>&1 | tail -8
date -u
OUT=$OUT timeout 150 python3 .dev/s38/layer_ab.py dec time 2>&1 | tail -14
date -u
