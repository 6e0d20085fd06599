# Session 65 call c: the new GPU tests, the EP8 layer at both blocks (layer16_ab.py), chord_bench on three scenarios.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache63 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
tar -C .dev -xJf .dev/s63/cache63.tar.xz; tar -C .dev/cache63 -xJf .dev/s63/cache63b.tar.xz; tar -C .dev/cache63 -xJf .dev/s64/cache64.tar.xz
for f in .dev/s65/cache*.tar.xz; do tar -C .dev/cache63 -xJf $f; done
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv,noheader
(cd packages/chord-kernels
 t() { local name=$1 lim=$2; shift 2; timeout $lim python3 -m pytest -q -m gpu -p no:cacheprovider -rf -n 2 "$@" > $OUT/$name.log 2>&1
       echo "$name rc=$? $(tail -1 $OUT/$name.log)"; grep -E "^FAILED|^ERROR" $OUT/$name.log | cut -c1-200 | head -8; }
 t tests_new 150 tests/test_indexed_wgmma_gpu.py tests/test_indexed_gpu.py tests/test_grouped_gpu.py -k "wide16 or wide_tok128 or widths or routing_order or layer or in_kernel or fused_moe")
date -u
timeout 120 python3 docs/results/h200-2026-12-06-s65/scripts/layer16_ab.py time 2>&1 | tee $OUT/layer.log | grep -v Warning
date -u
timeout 150 python3 -m chord_bench --scenarios ep8_tok128 ep8_tok341 ep8_masked64 --draws uniform --rep-ms 8 --max-minutes 2 \
   --impls chord-indexed,chord-grouped --peer humming-kernels --no-plot --out $OUT/bench > $OUT/bench.log 2>&1; echo bench rc=$?
grep -E "^\| (ep8|tp8)_[a-z0-9]+\*? +\|" $OUT/bench/table.md | cut -c1-200 | tail -20
date -u
