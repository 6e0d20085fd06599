# Session 64 call a: the committed tree (the 96- and 104-token gate_up items on whole stages with the pairs shifted,
# session 63's shift_gate_up.patch): the GPU tests over the kernels the change touches (bit for bit against the
# per-step loop and the reference, NaN-poisoned), then chord_bench's GEMMs against humming-kernels 0.1.19 on every
# target scenario (uniform draw). Kernels: .dev/s63/cache63*.tar.xz and .dev/s64/cache64.tar.xz (precompiled on the CPU, precompile_tests.py
# for the tests).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache63 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
tar -C .dev -xJf .dev/s63/cache63.tar.xz; tar -C .dev/cache63 -xJf .dev/s63/cache63b.tar.xz; tar -C .dev/cache63 -xJf .dev/s64/cache64.tar.xz
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv,noheader; git log --oneline -1
# four test workers fit the H200's 141 GB, two the H100's 80 GB
W=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | awk '{print ($1 > 100000) ? 4 : 2}')
(cd packages/chord-kernels
 t() { local name=$1 lim=$2; shift 2; timeout $lim python3 -m pytest -q -m gpu -p no:cacheprovider -rf -n $W "$@" > $OUT/$name.log 2>&1
       echo "$name rc=$? $(tail -1 $OUT/$name.log)"; grep -E "^FAILED|^ERROR" $OUT/$name.log | cut -c1-200 | head -8; }
 # the change's own tests first, then the files whole as far as the time allows
 t tests_change 90 tests/test_indexed_wgmma_gpu.py -k "commit_per_k_group or whole_stages"
 t tests ${TT:-140} tests/test_indexed_wgmma_gpu.py tests/test_subnormal_gpu.py tests/test_indexed_silu_mul_gpu.py)
date -u
# a short call (SCEN, BT, BM set) benches the scenarios the change touches first
timeout ${BT:-225} python3 -m chord_bench --scenarios ${SCEN:-ep8_tok16 ep8_tok43 ep8_tok128 ep8_tok341 tp8_1024 tp8_8192 ep8_masked8 \
   ep8_masked16 ep8_masked32 ep8_masked64 ep8_contig256 ep8_contig512} --draws uniform --rep-ms 8 --max-minutes ${BM:-3.3} \
   --impls chord-indexed,chord-grouped --peer humming-kernels --no-plot --out $OUT/bench > $OUT/bench.log 2>&1; echo bench rc=$?
date -u
grep -E "^\| (ep8|tp8)_[a-z0-9]+\*? +\|" $OUT/bench/table.md | cut -c1-240 | tail -30
