# Session 58 call b: the GPU test files call a did not reach (it stopped at 400 s in test_indexed_topk_sum_gpu),
# on session 57's final kernels (test_indexed_topk_sum_gpu and test_routing_gpu passed on them in session 57's call c); several workers because the forced configurations compile on the device.
# The cubins compiled here come back in $OUT/cache58b.tar.xz for later calls.
set -x
export PYTHONPATH=$(pwd)/packages/chord-kernels/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache57
mkdir -p $CHORD_CACHE_DIR
[ -f .dev/s57/cache57.tar.xz ] && tar -C .dev -xJf .dev/s57/cache57.tar.xz
touch /tmp/stamp; date -u; nvidia-smi --query-gpu=name,memory.total --format=csv
MIB=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1); W=4; [ "$MIB" -lt 100000 ] && W=3
cd packages/chord-kernels
run() { timeout $2 python3 -m pytest -q -m gpu -p no:cacheprovider -n $3 -rf --durations=8 tests/$1.py $4 > $OUT/$1.log 2>&1
        echo "$1 rc=$? $(grep -E '(passed|failed)' $OUT/$1.log | tail -1)"; grep -E "^FAILED|Error" $OUT/$1.log | cut -c1-220 | head -12; }
run test_indexed_wgmma_gpu 380 $W
run test_subnormal_gpu 120 1
cd ../..
(cd .dev/cache57 && find . -newer /tmp/stamp -type f | tar -cJf $OUT/cache58b.tar.xz -T - ; ls $OUT)
date -u
