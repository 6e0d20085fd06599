# Session 65 call a: chord_bench's GEMMs on tree b67ff42 against humming-kernels 0.1.19 on every target scenario
# (uniform draw), first H200 figures since session 61. Kernels precompiled on the CPU (.dev caches).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache63 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
tar -C .dev -xJf .dev/s63/cache63.tar.xz; tar -C .dev/cache63 -xJf .dev/s63/cache63b.tar.xz; tar -C .dev/cache63 -xJf .dev/s64/cache64.tar.xz
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv,noheader
timeout ${BT:-400} python3 -m chord_bench --scenarios ${SCEN:-ep8_tok16 ep8_tok43 ep8_tok128 ep8_tok341 tp8_1024 tp8_8192 ep8_masked8 \
   ep8_masked16 ep8_masked32 ep8_masked64 ep8_contig256 ep8_contig512} --draws uniform --rep-ms 8 --max-minutes ${BM:-6} \
   --impls chord-indexed,chord-grouped --peer humming-kernels --no-plot --out $OUT/bench > $OUT/bench.log 2>&1; echo bench rc=$?
date -u
grep -E "^\| (ep8|tp8)_[a-z0-9]+\*? +\|" $OUT/bench/table.md | cut -c1-240 | tail -30
