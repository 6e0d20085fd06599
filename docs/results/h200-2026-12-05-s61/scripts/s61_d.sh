# Session 61 call d: the plan with the wide items per K group (the 64 x 2 gate_up items from K = 4096 without row
# widths, the 72-96-token one-block downs up to K = 2048, on whole stages) -- the GPU tests of the indexed and
# grouped families that run those items, then chord_bench's GEMMs against humming-kernels 0.1.19 on the target
# scenarios they touch, and the layer. Kernels: .dev/s61/cache61.tar.xz (precompile of this tree + call b's).
set -x
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache61 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
tar -C .dev -xJf .dev/s61/cache61.tar.xz
date -u; nvidia-smi --query-gpu=name --format=csv,noheader
cd packages/chord-kernels
t() { local name=$1 lim=$2; shift 2; timeout $lim python3 -m pytest -q -m gpu -p no:cacheprovider -rf "$@" > $OUT/$name.log 2>&1
      echo "$name rc=$? $(grep -E '^[0-9]+ (passed|failed)|passed|failed' $OUT/$name.log | tail -1)"; grep -E "^FAILED" $OUT/$name.log | cut -c1-200 | head -5; }
t wgmma 220 -n 3 tests/test_indexed_wgmma_gpu.py tests/test_subnormal_gpu.py
t grouped 80 -n 2 tests/test_grouped_gpu.py tests/test_indexed_split_tail_gpu.py
cd ../..
timeout 150 python3 -m chord_bench --scenarios ep8_tok341 ep8_masked64 ep8_contig256 ep8_contig512 ep8_tok128 --draws uniform \
   --rep-ms 8 --impls chord-indexed,chord-grouped --peer humming-kernels --no-plot --out $OUT/bench > $OUT/bench.log 2>&1; echo bench rc=$?
timeout 80 python3 -m chord_bench.layer --rounds 5 --draw uniform --scenarios ep8_tok341 tp8_12288 \
   --out $OUT/layer > $OUT/layer.log 2>&1; echo layer rc=$?
date -u
grep -E "^\| (ep8|tp8)_[a-z0-9]+\*? +\|" $OUT/bench/table.md | cut -c1-240 | tail -6
grep -E "^\|" $OUT/layer/layer.md | cut -c1-220 | head -8
