# Session 73 call d (carry [".dev/s71", ".dev/s72", ".dev/s73", ".whl"]), main 528db82: the whole layer at every TP8 token
# count of chord_bench.layer, against humming-kernels 0.1.19's GEMMs with vLLM's steps (the new runs' plan).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
mkdir -p .dev/cache71; for a in s71/cache s71/cache_device s71/cache_runs s71/cache_dev2 s71/cache_plan s72/cache_device72 s73/cache73 s73/cache73c s73/cache73d; do tar -C .dev/cache71 -xJf .dev/$a.tar.xz; done
export CHORD_CACHE_DIR=$(pwd)/.dev/cache71
date -u; nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader; git log --oneline -1
timeout ${LT:-240} python3 -m chord_bench.layer --rounds 5 --draw uniform --scenarios tp8_decode160 tp8_512 tp8_1024 tp8_2304 tp8_4096 \
  tp8_5120 tp8_6144 tp8_8192 tp8_12288 --out $OUT/layer > $OUT/layer.log 2>&1; echo layer rc=$?
grep -E "^tp8" $OUT/layer.log
date -u
