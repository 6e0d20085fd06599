set -x
tar -C .dev -xJf .dev/cache.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache
source .dev/env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
python3 .dev/s26/deep.py precompile 16 2>&1 | tail -5
PARTS=gemm,layer python3 .dev/s26/deep.py 2>&1 | tee $OUT/deep.log
cp $OUT/deep.json $OUT/deep.json 2>/dev/null; true
