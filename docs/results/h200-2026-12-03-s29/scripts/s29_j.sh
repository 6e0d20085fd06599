set -x
tar -C .dev -xJf .dev/cache29f.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache29f
source .dev/env.sh
timeout 60 python3 .dev/s29/sanitize_whole.py 2>&1 | tail -6 | tee $OUT/sanitize_plain.log
for tool in memcheck racecheck synccheck; do
  timeout 100 compute-sanitizer --tool $tool --show-backtrace no python3 .dev/s29/sanitize_whole.py > $OUT/$tool.log 2>&1
  echo "$tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|equal|done" $OUT/$tool.log | sort | uniq -c | head -10
done
