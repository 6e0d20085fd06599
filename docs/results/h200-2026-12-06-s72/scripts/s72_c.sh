# Session 72 call c (branch s72-pp4; carry [".dev/s72", ".whl"]): TP8's down in runs on four consumer warpgroups in turns
# (pingpong) against the plan (pp4_ab.py), then the runs' GPU tests on the changed header (kernels compiled here).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
mkdir -p .dev/cache72p && tar -C .dev/cache72p -xJf .dev/s72/cache_pp4.tar.xz; export CHORD_CACHE_DIR=$(pwd)/.dev/cache72p
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw,power.limit --format=csv,noheader; git log --oneline -1
timeout ${AT:-200} python3 .dev/s72/pp4_ab.py time ${TOK:-8192,1024,2048,4096,12288} > $OUT/pp4_ab.log 2>&1; echo ab rc=$?; date -u
(cd packages/chord-kernels && timeout ${TT:-150} python3 -m pytest -q -m gpu -p no:cacheprovider -rf -n 3 \
  -k "four_consumer_runs or runs_bit_identical or runs4 or pingpong or tp8" tests/test_indexed_wgmma_gpu.py tests/test_indexed_topk_sum_gpu.py > $OUT/tests.log 2>&1
 echo "tests rc=$? $(tail -n 1 $OUT/tests.log)"; grep -E "^FAILED|^ERROR" $OUT/tests.log | cut -c1-200 | head -8)
date -u
grep -v Warning $OUT/pp4_ab.log | tail -n 8
