# Session 68 call d: TP8's routing block at 150-190 rows per expert with the prefetching items (blocks_ab.py), then
# chord_bench's GEMMs on main 1e02798 against humming-kernels 0.1.19, every target scenario (uniform draw).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
export CHORD_CACHE_DIR=$(pwd)/.dev/cache68
mkdir -p .dev/cache68; tar -C .dev/cache68 -xJf .dev/s68/cache68.tar.xz
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv,noheader
timeout ${LT:-140} python3 .dev/s68/blocks_ab.py time 2>&1 | grep -v Warning
date -u
timeout ${BT:-380} python3 -m chord_bench --scenarios ${SCEN:-ep8_tok16 ep8_tok43 ep8_tok128 ep8_tok341 tp8_1024 tp8_8192 ep8_masked8 \
   ep8_masked16 ep8_masked32 ep8_masked64 ep8_contig256 ep8_contig512} --draws uniform --rep-ms 8 --max-minutes ${BM:-5} \
   --impls chord-indexed,chord-grouped --peer humming-kernels --no-plot --out $OUT/bench > $OUT/bench.log 2>&1; echo bench rc=$?
date -u
grep -E "^\| (ep8|tp8)_[a-z0-9]+\*? +\|" $OUT/bench/table.md | cut -c1-240 | tail -12
