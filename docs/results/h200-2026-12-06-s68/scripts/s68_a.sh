# Session 68 call a: (1) the prefetch of the next stage's rows on the items session 67 did not measure (72-token
# one-block items on two stages, 24 x 2 items on four warpgroups: prefetch72_ab.py, main's header); (2) which CTAs
# of an item prefetch its rows (pflead_ab.py, wgmma.cuh with pf_exp.patch applied, then reversed).
# Kernels precompiled on the CPU (.dev/s68/cache68*.tar.xz).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
mkdir -p .dev/cache68 .dev/cache68x; tar -C .dev/cache68 -xJf .dev/s68/cache68.tar.xz; tar -C .dev/cache68x -xJf .dev/s68/cache68x.tar.xz
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv,noheader
CHORD_CACHE_DIR=$(pwd)/.dev/cache68 timeout ${AT:-150} python3 .dev/s68/prefetch72_ab.py time 2>&1 | grep -v Warning
date -u
git apply .dev/s68/pf_exp.patch || exit
CHORD_CACHE_DIR=$(pwd)/.dev/cache68x timeout ${BT:-300} python3 .dev/s68/pflead_ab.py time ${SHAPES:-ep341,tp8192,ep100,ep160,ep185,ep64} 2>&1 | grep -v Warning
git apply -R .dev/s68/pf_exp.patch
date -u
