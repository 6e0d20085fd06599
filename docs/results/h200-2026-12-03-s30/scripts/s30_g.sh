set -x
tar -C .dev -xJf .dev/cache30e.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache30e
source .dev/env.sh
mkdir -p $OUT/sanitize
timeout 60 python3 .dev/s30/sanitize_subnormal.py 2>&1 | tail -8 | tee $OUT/sanitize/plain.log
for tool in memcheck synccheck racecheck; do
  timeout 130 compute-sanitizer --tool $tool --show-backtrace no python3 .dev/s30/sanitize_subnormal.py > $OUT/sanitize/$tool.log 2>&1
  echo "$tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|equal|done" $OUT/sanitize/$tool.log | sort | uniq -c | head -12
done
