# Session 72 call a (prepared in session 71; carry [".dev/s71", ".dev/s72", ".whl"]):
# (1) every chord-kernels GPU file with two workers on main (597d166's plan: TP8's 32-token downs on the four-warpgroup
#     runs; its new cases bm32 / tok_e_21_many / runs4_bm32_tp8_down), chord-vllm core, chord-bench GPU;
# (2) chord_bench, every target scenario, against humming-kernels 0.1.19;
# (3) epi_ab.py with .dev/s72/epi.patch applied: the epilogue's cost (no stores / no epilogue) on the prefill GEMMs.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src:$(pwd)/packages/chord-vllm/src PYTHONUNBUFFERED=1
mkdir -p .dev/cache71; for a in cache cache_device cache_runs cache_dev2 cache_plan; do tar -C .dev/cache71 -xJf .dev/s71/$a.tar.xz; done
export CHORD_CACHE_DIR=$(pwd)/.dev/cache71; touch /tmp/marker
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv,noheader; git log --oneline -1 2>/dev/null
(cd packages/chord-kernels && timeout ${TT:-240} python3 -m pytest -q -m gpu -p no:cacheprovider -rf -n 2 --durations=5 tests/ > $OUT/tests.log 2>&1
 echo "kernels tests rc=$? $(tail -n 1 $OUT/tests.log)"; grep -E "^FAILED|^ERROR" $OUT/tests.log | cut -c1-200 | head -8)
(cd packages/chord-vllm && timeout 60 python3 -m pytest -q -m gpu -p no:cacheprovider -rf tests/test_core.py > $OUT/vllm.log 2>&1; echo "vllm rc=$? $(tail -n 1 $OUT/vllm.log)")
(cd packages/chord-bench && timeout 90 python3 -m pytest -q -m gpu -p no:cacheprovider -rf > $OUT/bench_tests.log 2>&1; echo "bench tests rc=$? $(tail -n 1 $OUT/bench_tests.log)")
(cd .dev/cache71 && find . -type f -newer /tmp/marker ! -name '*.lock' | tar -cJf $OUT/cache_device72.tar.xz -T -)
date -u
timeout ${BT:-90} python3 -m chord_bench --scenarios ep8_tok16 ep8_tok43 ep8_tok128 ep8_tok341 tp8_1024 tp8_8192 ep8_masked8 ep8_masked16 \
  ep8_masked32 ep8_masked64 ep8_contig256 ep8_contig512 --draws uniform --rep-ms 8 --max-minutes 1 --impls chord-indexed,chord-grouped \
  --peer humming-kernels --no-plot --out $OUT/bench > $OUT/bench.log 2>&1; echo bench rc=$?; date -u
patch -p1 -s < .dev/s72/epi.patch && mkdir -p .dev/cache72 && tar -C .dev/cache72 -xJf .dev/s72/cache_epi.tar.xz && \
  CHORD_CACHE_DIR=$(pwd)/.dev/cache72 timeout ${ET:-120} python3 .dev/s72/epi_ab.py time > $OUT/epi_ab.log 2>&1; echo epi rc=$?
patch -p1 -R -s < .dev/s72/epi.patch; date -u
grep -E "^\| (ep8|tp8)_[a-z0-9]+\*? +\| uniform \| [0-9]" $OUT/bench/table.md | tr -s ' ' | cut -d'|' -f2,9-16
grep -E "bm +[0-9]+ (up|down)" $OUT/epi_ab.log
