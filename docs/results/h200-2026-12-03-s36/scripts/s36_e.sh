set -x
tar -C .dev -xJf .dev/cache36h.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache36h
source .dev/env.sh
git status --short | head -8; date -u
timeout 120 python3 .dev/s36/ab.py dyn16 time 2>&1 | tail -10
date -u
timeout 150 python3 .dev/s36/layer_dyn.py time ep8 2>&1 | tail -18
date -u
