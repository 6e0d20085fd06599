# Session 80 call b (carry [".dev/s80", ".whl"]): main (kernels as 4bf4e51). Stops at once on any GPU but an H200.
# On an H200: chord_bench on every target scenario against humming-kernels 0.1.19, then the whole layer
# (chord_bench.layer, ${LS:-every layer scenario}). The device's own compiles come back as $OUT/cache_new.tar.xz.
case "$(nvidia-smi --query-gpu=name --format=csv,noheader)" in *H200*) ;; *) nvidia-smi --query-gpu=name --format=csv,noheader; echo 'not an H200: nothing to run'; exit 0;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src:$(pwd)/packages/chord-vllm/src PYTHONUNBUFFERED=1
mkdir -p .dev/cache79; for a in .dev/s80/cache*.tar.xz; do tar -C .dev/cache79 -xJf $a; done
export CHORD_CACHE_DIR=$(pwd)/.dev/cache79; touch .dev/stamp79
date -u; nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader; git log --oneline -1 2>/dev/null
timeout ${BT:-330} python3 -m chord_bench --scenarios ep8_decode tp8_decode160 ep8_tok16 ep8_tok43 ep8_tok128 ep8_tok341 tp8_1024 tp8_8192 ep8_masked8 ep8_masked16 ep8_masked32 ep8_masked64 ep8_contig256 ep8_contig512 \
  --draws uniform --rep-ms 8 --max-minutes ${MM:-4} --impls chord-indexed,chord-grouped --peer humming-kernels --no-plot --out $OUT/bench > $OUT/bench.log 2>&1; echo bench rc=$?; date -u
case "$(nvidia-smi --query-gpu=name --format=csv,noheader)" in
  *H200*)
    timeout ${LT:-150} python3 -m chord_bench.layer --rounds 5 ${LS:+--scenarios $LS} --out $OUT/layer > $OUT/layer.log 2>&1; echo layer rc=$?
    grep -E "^\| (ep8|tp8)_" $OUT/layer/layer.md | cut -d'|' -f2,5,8;;
esac
grep -E "^\| (ep8|tp8)_[a-z0-9]+\*? +\| uniform \| [0-9]" $OUT/bench/table.md | tr -s ' ' | cut -d'|' -f2,6-16
(cd .dev/cache79 && find . -type f -newer ../stamp79 | tar -cJf $OUT/cache_new.tar.xz -T -); ls -la $OUT/cache_new.tar.xz
date -u
