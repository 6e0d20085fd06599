# Session 59 call d: the planned split tail (TAIL_CUT_PARTS = 8 on the gate_up items of at most 56 tokens from
# K = 4096). 1) the layer with and without it, both draws (scripts/layer_cut_ab.py); 2) GPU tests that now run
# the cut at small shapes; 3) chord_bench's GEMMs against humming-kernels 0.1.19, middle scenarios, both draws.
# Kernels precompiled on the CPU (.dev/s59d/cache59.tar.xz).
set -x
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src:$(pwd)/packages/chord-vllm/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache59
tar -C .dev -xJf .dev/s59d/cache59.tar.xz
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv
MIB=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1); W=3; [ "$MIB" -lt 100000 ] && W=2
OUT=$OUT timeout 200 python3 docs/results/h200-2026-12-05-s59/scripts/layer_cut_ab.py time > $OUT/layer_cut_ab.log 2>&1; echo layer ab rc=$?
date -u
(cd packages/chord-kernels && timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider -n $W -rf tests/test_indexed_split_tail_gpu.py \
   tests/test_indexed_gpu.py tests/test_indexed_silu_mul_gpu.py tests/test_grouped_gpu.py -k "not contiguous" > $OUT/tests.log 2>&1; echo tests rc=$?)
grep -E "passed|failed|^FAILED|^E  " $OUT/tests.log | cut -c1-220 | head -12
(cd packages/chord-vllm && timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_core.py > $OUT/vllm_core.log 2>&1; echo vllm core rc=$?)
tail -1 $OUT/vllm_core.log
date -u
timeout 150 python3 -m chord_bench --scenarios ep8_tok16 ep8_tok43 ep8_masked16 ep8_masked32 tp8_1024 --draws uniform,skewed \
   --rep-ms 10 --impls chord-indexed,chord-grouped --peer humming-kernels --no-plot --out $OUT/bench > $OUT/bench.log 2>&1; echo bench rc=$?
date -u
grep -v "^$" $OUT/layer_cut_ab.log | cut -c1-200 | tail -24
grep -iE "ratio|×|x " $OUT/bench.log | tail -25
