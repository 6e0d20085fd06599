# Session 60 call e: chord-bench's GPU tests on fc2d860's kernels, then chord_bench's GEMMs against humming-kernels
# 0.1.19 on the skewed draw (one hot expert) of the scenarios whose plan takes the K cut or whose ratio moved with
# it in session 59, and the layer (chord_bench.layer) on both draws. Kernels: .dev/s60/cache60.tar.xz.
set -x
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache60 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
tar -C .dev -xJf .dev/s60/cache60.tar.xz
date -u; nvidia-smi --query-gpu=name --format=csv,noheader
(cd packages/chord-bench && timeout 100 python3 -m pytest -q -m gpu -p no:cacheprovider -rf tests/test_gpu.py > $OUT/bench_tests.log 2>&1
 echo bench tests rc=$?; grep -E "passed|failed|^FAILED" $OUT/bench_tests.log | tail -3)
timeout 130 python3 -m chord_bench --scenarios ep8_tok16 ep8_tok43 ep8_masked16 ep8_masked32 --draws skewed --rep-ms 8 \
   --impls chord-indexed,chord-grouped --peer humming-kernels --no-plot --out $OUT/bench > $OUT/bench.log 2>&1; echo bench rc=$?
for d in uniform skewed; do
  timeout 60 python3 -m chord_bench.layer --rounds 7 --draw $d --scenarios ep8_tok12 ep8_masked16 ep8_masked32 \
     --out $OUT/layer_$d > $OUT/layer_$d.log 2>&1; echo layer $d rc=$?
done
date -u
grep -E "^\| (ep8|tp8)_[a-z0-9]+\*? +\| skewed \| [0-9]" $OUT/bench/table.md | cut -c1-200
cat $OUT/layer_*/layer.md 2>/dev/null | grep -E "^\|" | cut -c1-200 | head -20
