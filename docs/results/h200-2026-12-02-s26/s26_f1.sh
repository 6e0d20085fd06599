set -x
tar -C .dev -xJf .dev/cache26.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache26
source .dev/env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
python3 docs/results/h200-2026-12-02-s25/precompile_tests.py 16 2>&1 | tail -2 | tee $OUT/precompile.log
python3 .dev/s26/sanitize_pairs.py 2>&1 | tail -8 | tee $OUT/sanitize_plain.log
(cd packages/chord-kernels && timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -8) | tee $OUT/gpu_kernels.log
(cd packages/chord-vllm && timeout 90 python3 -m pytest -q -p no:cacheprovider tests/test_core.py 2>&1 | tail -2) | tee $OUT/gpu_vllm.log
(cd packages/chord-bench && timeout 120 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -2) | tee $OUT/gpu_bench.log
for tool in memcheck synccheck; do
  timeout 100 compute-sanitizer --tool $tool --show-backtrace no python3 .dev/s26/sanitize_pairs.py > $OUT/$tool.log 2>&1
  echo "$tool rc=$?"; grep -E "ERROR SUMMARY|equal|done" $OUT/$tool.log | sort | uniq -c | head -12
done
