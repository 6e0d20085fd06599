# Session 78 call c (carry [".dev/s78", ".whl"]): main at 0365538 (kernels as 4bf4e51). The whole experts' layer
# (chord_bench.layer: Chord against humming's GEMMs with vLLM's steps) at the prefill and DeepEP shapes.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src:$(pwd)/packages/chord-vllm/src PYTHONUNBUFFERED=1
mkdir -p .dev/cache78; for a in .dev/s78/cache*.tar.xz; do tar -C .dev/cache78 -xJf $a; done
export CHORD_CACHE_DIR=$(pwd)/.dev/cache78
date -u; nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader; git log --oneline -1 2>/dev/null
timeout ${LT:-240} python3 -m chord_bench.layer --rounds 5 --scenarios ${LS:-tp8_4096 tp8_8192 tp8_12288 ep8_tok128 ep8_tok341 ep8_masked32 ep8_masked64} --out $OUT/layer > $OUT/layer.log 2>&1; echo layer rc=$?
tail -n 30 $OUT/layer/layer.md 2>/dev/null || tail -n 20 $OUT/layer.log
date -u
