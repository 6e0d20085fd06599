set -x
export CHORD_CACHE_DIR=$(pwd)/.dev/cache27
source .dev/env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
python3 .dev/s27/reload_ab.py precompile 16 2>&1 | tail -1
ROUNDS=5 timeout 170 python3 .dev/s27/reload_ab.py time 2>&1 | tee $OUT/reload_ab.log
tar -C .dev -xJf .dev/cache27f.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache27f
timeout 60 python3 docs/results/h200-2026-12-02-s25/precompile_tests.py 16 2>&1 | tail -1
timeout 60 python3 .dev/s27/sanitize_reload.py 2>&1 | tail -12 | tee $OUT/sanitize_plain.log
(cd packages/chord-kernels && timeout 170 python3 -m pytest -m gpu -q -x -p no:cacheprovider tests 2>&1 | tail -4) | tee $OUT/gpu_kernels.log
for tool in memcheck racecheck; do
  timeout 75 compute-sanitizer --tool $tool --show-backtrace no python3 .dev/s27/sanitize_reload.py > $OUT/$tool.log 2>&1
  echo "$tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FAIL|done" $OUT/$tool.log | sort | uniq -c | head -8
done
