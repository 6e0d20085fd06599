# Session 67 call b: where the pair's time goes on the two-stage items (exp_ab.py with wgmma.cuh's CHORD_EXP_PAIR
# hooks; kernels compiled here and carried).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache67b PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
mkdir -p .dev/cache67b; tar -C .dev/cache67b -xJf .dev/s67/cache67x.tar.xz
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv,noheader
timeout ${T:-330} python3 .dev/s67/exp_ab.py time ${SHAPES:-tp8192,ep64,ep43,ep341,ep128} 2>&1 | grep -v Warning
date -u
# memcheck, one configuration per process (the first sanitizer run stopped at an out-of-bounds report), the
# default allocator; plus the unpaired ring.
unset PYTORCH_CUDA_ALLOC_CONF
for c in "ring16x8_dynamic" "ring16x8_dynamic unpaired" "ring16x8_strided" "bm80_256k"; do
  echo "== memcheck $c"; timeout 60 compute-sanitizer --tool memcheck --report-api-errors no --print-limit 6 \
    python3 .dev/s67/memcheck_diag.py $c > $OUT/memcheck_${c// /_}.log 2>&1; echo "rc=$?"
  grep -E "^(pw\.|a:|out:|ok|packed|scales)|Invalid|Access to|by thread|ERROR SUMMARY" $OUT/memcheck_${c// /_}.log | head -16
done
date -u
