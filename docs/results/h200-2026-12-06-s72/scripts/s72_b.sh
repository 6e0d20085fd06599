# Session 72 call b (carry [".dev/s71", ".dev/s72", ".whl"]): (1) chord_bench, every target scenario, against
# humming-kernels 0.1.19 (on an H200 if one came: the first since session 61); (2) runs_ab.py at TP8's 24-token blocks
# between session 71's 512 and 768 tokens (576, 640, 704): whether a rows-per-expert rule moves them to the runs.
# (.dev/s72/runs_ab.py: ../../h200-2026-12-06-s71/scripts/runs_ab.py reading its precompile token counts from $TOKENS;
# its time mode, with the counts given, is the same code.)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src:$(pwd)/packages/chord-vllm/src PYTHONUNBUFFERED=1
mkdir -p .dev/cache71; for a in s71/cache s71/cache_device s71/cache_runs s71/cache_dev2 s71/cache_plan s72/cache_device72; do tar -C .dev/cache71 -xJf .dev/$a.tar.xz; done
export CHORD_CACHE_DIR=$(pwd)/.dev/cache71
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw,power.limit --format=csv,noheader; git log --oneline -1 2>/dev/null
timeout ${BT:-120} python3 -m chord_bench --scenarios ep8_tok16 ep8_tok43 ep8_tok128 ep8_tok341 tp8_1024 tp8_8192 ep8_masked8 ep8_masked16 \
  ep8_masked32 ep8_masked64 ep8_contig256 ep8_contig512 --draws uniform --rep-ms 8 --max-minutes 1 --impls chord-indexed,chord-grouped \
  --peer humming-kernels --no-plot --out $OUT/bench > $OUT/bench.log 2>&1; echo bench rc=$?; date -u
timeout ${AT:-150} python3 .dev/s72/runs_ab.py time ${TOK:-640,576,704,512,768} > $OUT/runs_ab.log 2>&1; echo ab rc=$?
date -u
grep -v Warning $OUT/runs_ab.log | tail -n 12
grep -E "^\| (ep8|tp8)_[a-z0-9]+\*? +\| uniform \| [0-9]" $OUT/bench/table.md | tr -s ' ' | cut -d'|' -f2,6-16
