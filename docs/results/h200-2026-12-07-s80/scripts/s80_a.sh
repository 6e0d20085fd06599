# Session 80 call a (carry [".dev/s80", ".whl"]): main at c484848 (kernels as 4bf4e51). On an H200: chord_bench on the
# 14 target scenarios and the whole layer after it (session 79's s79_b.sh). On an H100: the whole experts' layer
# (chord_bench.layer, every layer scenario: Chord against humming's GEMMs with vLLM's steps), a second H100 run
# beside session 78's.
case "$(nvidia-smi --query-gpu=name --format=csv,noheader)" in
  *H200*) exec bash .dev/s80/s80_b.sh;;
esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src:$(pwd)/packages/chord-vllm/src PYTHONUNBUFFERED=1
mkdir -p .dev/cache80; for a in .dev/s80/cache*.tar.xz; do tar -C .dev/cache80 -xJf $a; done
export CHORD_CACHE_DIR=$(pwd)/.dev/cache80
date -u; nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader; git log --oneline -1 2>/dev/null
timeout ${LT:-500} python3 -m chord_bench.layer --rounds 5 ${LS:+--scenarios $LS} --out $OUT/layer > $OUT/layer.log 2>&1; echo layer rc=$?
grep -E "^\| (ep8|tp8)_" $OUT/layer/layer.md | cut -d'|' -f2,5,8
date -u
