# Session 66 call: the GPU tests of the CTA pairs and of what they touch, then chord_bench (GEMMs and the layer)
# against humming-kernels 0.1.19 on the scenarios the pairs change. Kernels precompiled on the CPU (.dev/cache66t).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache66t PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
mkdir -p .dev/cache66t; for f in .dev/s66/cache*.tar.xz; do tar -C .dev/cache66t -xJf $f; done
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv,noheader
(cd packages/chord-kernels
 t() { local name=$1 lim=$2; shift 2; timeout $lim python3 -m pytest -q -m gpu -p no:cacheprovider -rf -n 2 "$@" > $OUT/$name.log 2>&1
       echo "$name rc=$? $(tail -1 $OUT/$name.log)"; grep -E "^FAILED|^ERROR" $OUT/$name.log | cut -c1-200 | head -8; }
 t pair 150 tests/test_indexed_cta_pair_gpu.py
 t related ${TR:-150} tests/test_indexed_wgmma_gpu.py tests/test_indexed_gpu.py tests/test_grouped_gpu.py -k "${TK:-wide or ring or layer or fused_moe or routing_order}")
date -u
timeout ${BT:-150} python3 -m chord_bench --scenarios ${SCEN:-ep8_tok128 tp8_8192} --draws uniform --rep-ms 8 --max-minutes 2 \
   --impls chord-indexed,chord-grouped --peer humming-kernels --no-plot --out $OUT/bench > $OUT/bench.log 2>&1; echo bench rc=$?
grep -E "^\| (ep8|tp8)_[a-z0-9]+\*? +\|" $OUT/bench/table.md | cut -c1-200 | tail -8
date -u
timeout ${LT:-100} python3 -m chord_bench.layer --rounds 5 --draw uniform --scenarios ${LSCEN:-ep8_tok128} --out $OUT/layer > $OUT/layer.log 2>&1; echo layer rc=$?
tail -12 $OUT/layer.log | cut -c1-200
date -u
