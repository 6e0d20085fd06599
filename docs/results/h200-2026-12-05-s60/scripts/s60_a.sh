# Session 60 call a: session 59's kcut_registers.patch applied (the K cut's part, parts and tail item in uniform
# registers). Split-tail and fused SiLU GPU tests, the layer A/B of the planned cut against the uncut plan, then
# chord_bench's GEMMs against humming-kernels 0.1.19 on every target scenario (uniform draw).
# Kernels: .dev/s59g/cache59g.tar.xz (HEAD 63ed768 + the patch; `precompile` instant on it).
set -x
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache59g PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
tar -C .dev -xJf .dev/s59g/cache59g.tar.xz
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv,noheader
(cd packages/chord-kernels && timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider -rf tests/test_indexed_split_tail_gpu.py \
   tests/test_indexed_silu_mul_gpu.py > $OUT/tests.log 2>&1; echo tests rc=$?)
grep -E "passed|failed|^FAILED" $OUT/tests.log | cut -c1-200 | head -8
OUT=$OUT timeout 150 python3 docs/results/h200-2026-12-05-s59/scripts/layer_cut_ab.py time > $OUT/layer_cut_ab.log 2>&1; echo layer ab rc=$?
date -u
timeout 230 python3 -m chord_bench --scenarios ep8_tok16 ep8_tok43 ep8_tok128 ep8_tok341 tp8_1024 tp8_8192 ep8_masked8 \
   ep8_masked16 ep8_masked32 ep8_masked64 ep8_contig256 ep8_contig512 --draws uniform --rep-ms 8 --max-minutes 3.2 \
   --impls chord-indexed,chord-grouped --peer humming-kernels --no-plot --out $OUT/bench > $OUT/bench.log 2>&1; echo bench rc=$?
date -u
grep -v "^$" $OUT/layer_cut_ab.log | cut -c1-200 | tail -16
grep -E "^\| (ep8|tp8)_[a-z0-9]+\*? +\|" $OUT/bench/table.md | cut -c1-240 | tail -30
