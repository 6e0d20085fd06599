# Session 64 call b: the committed tree -- the whole layer (chord_bench.layer: routing, both GEMMs, SiLU, the
# top-k sum; Chord against humming-kernels 0.1.19 as vLLM 0.33 runs it) on the headline TP8 / EP8 / masked scenarios,
# then the indexed family's other GPU suites and the grouped family's (the precompile hook change).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache63 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
[ -d .dev/cache63 ] || { tar -C .dev -xJf .dev/s63/cache63.tar.xz; tar -C .dev/cache63 -xJf .dev/s63/cache63b.tar.xz
  tar -C .dev/cache63 -xJf .dev/s64/cache64.tar.xz; }
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv,noheader; git log --oneline -1
timeout 250 python3 -m chord_bench.layer --rounds 5 --draw uniform --scenarios tp8_1024 tp8_8192 ep8_tok12 ep8_tok43 \
   ep8_tok128 ep8_tok341 ep8_masked16 ep8_masked32 --out $OUT/layer > $OUT/layer.log 2>&1; echo layer rc=$?
date -u
cd packages/chord-kernels
t() { local name=$1 lim=$2; shift 2; timeout $lim python3 -m pytest -q -m gpu -p no:cacheprovider -rf "$@" > $OUT/$name.log 2>&1
      echo "$name rc=$? $(tail -1 $OUT/$name.log)"; grep -E "^FAILED|^ERROR" $OUT/$name.log | cut -c1-200 | head -5; }
t indexed 150 -n 2 tests/test_indexed_gpu.py tests/test_indexed_topk_sum_gpu.py tests/test_indexed_split_tail_gpu.py
t grouped 120 -n 2 tests/test_grouped_gpu.py
date -u
grep -E "^\|" $OUT/layer/layer.md | cut -c1-220 | head -20
