# Session 78 call a (carry [".dev/s78", ".whl"]): main at 0365538 (kernels as 4bf4e51; session 77's s77_a.sh with the caches of .dev/s78). On an H200: chord_bench on
# every target scenario, then the op GPU tests. On an H100: every chord-kernels GPU test file (two workers) and
# chord-vllm core. Either way the device's own compiles come back as $OUT/cache_new.tar.xz.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src:$(pwd)/packages/chord-vllm/src PYTHONUNBUFFERED=1
mkdir -p .dev/cache77; for a in .dev/s78/cache*.tar.xz; do tar -C .dev/cache77 -xJf $a; done
export CHORD_CACHE_DIR=$(pwd)/.dev/cache77; touch .dev/stamp77
date -u; nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader; git log --oneline -1 2>/dev/null
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
case "$gpu" in
  *H200*)
    timeout ${BT:-330} python3 -m chord_bench --scenarios ep8_decode tp8_decode160 ep8_tok16 ep8_tok43 ep8_tok128 ep8_tok341 tp8_1024 tp8_8192 ep8_masked8 ep8_masked16 ep8_masked32 ep8_masked64 ep8_contig256 ep8_contig512 \
      --draws uniform --rep-ms 8 --max-minutes ${MM:-4} --impls chord-indexed,chord-grouped --peer humming-kernels --no-plot --out $OUT/bench > $OUT/bench.log 2>&1; echo bench rc=$?; date -u
    (cd packages/chord-kernels && timeout ${TH:-120} python3 -m pytest -q -m gpu -p no:cacheprovider -rf -n 2 tests/ > $OUT/tests.log 2>&1
     echo "kernels tests rc=$? $(tail -n 1 $OUT/tests.log)"; grep -E "^FAILED|^ERROR" $OUT/tests.log | cut -c1-200 | head -8)
    grep -E "^\| (ep8|tp8)_[a-z0-9]+\*? +\| uniform \| [0-9]" $OUT/bench/table.md | tr -s ' ' | cut -d'|' -f2,6-16;;
  *)
    (cd packages/chord-kernels && timeout ${TT:-360} python3 -m pytest -q -m gpu -p no:cacheprovider -rf -n 2 --durations=5 tests/ > $OUT/tests.log 2>&1
     echo "kernels tests rc=$? $(tail -n 1 $OUT/tests.log)"; grep -E "^FAILED|^ERROR" $OUT/tests.log | cut -c1-200 | head -8)
    (cd packages/chord-vllm && timeout 60 python3 -m pytest -q -m gpu -p no:cacheprovider -rf tests/test_core.py > $OUT/vllm.log 2>&1; echo "vllm rc=$? $(tail -n 1 $OUT/vllm.log)");;
esac
(cd .dev/cache77 && find . -type f -newer ../stamp77 | tar -cJf $OUT/cache_new.tar.xz -T -); ls -la $OUT/cache_new.tar.xz
date -u
