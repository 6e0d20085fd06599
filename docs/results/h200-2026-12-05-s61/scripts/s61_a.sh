# Session 61 call a (refused twice in session 61; no GPU was lent): main as it ships -- chord_bench's GEMMs against
# humming-kernels 0.1.19 on every target scenario (uniform draw), then the whole layer (chord_bench.layer) on the
# TP8, EP8 and DeepEP low-latency scenarios of the headline table. Every kernel it launches has the SASS of
# ffb913c's (session 61 changed no planned kernel). Kernels: .dev/s61/cache61.tar.xz (precompiled on the CPU).
set -x
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache61 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
tar -C .dev -xJf .dev/s61/cache61.tar.xz
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv,noheader; git log --oneline -1
timeout 240 python3 -m chord_bench --scenarios ep8_tok16 ep8_tok43 ep8_tok128 ep8_tok341 tp8_1024 tp8_8192 ep8_masked8 \
   ep8_masked16 ep8_masked32 ep8_masked64 ep8_contig256 ep8_contig512 --draws uniform --rep-ms 8 --max-minutes 3.3 \
   --impls chord-indexed,chord-grouped --peer humming-kernels --no-plot --out $OUT/bench > $OUT/bench.log 2>&1; echo bench rc=$?
date -u
timeout 230 python3 -m chord_bench.layer --rounds 5 --draw uniform --scenarios tp8_1024 tp8_8192 ep8_tok12 ep8_tok43 \
   ep8_tok128 ep8_tok341 ep8_masked16 ep8_masked32 --out $OUT/layer > $OUT/layer.log 2>&1; echo layer rc=$?
date -u
grep -E "^\| (ep8|tp8)_[a-z0-9]+\*? +\|" $OUT/bench/table.md | cut -c1-240 | tail -30
grep -E "^\|" $OUT/layer/layer.md | cut -c1-220 | head -20
