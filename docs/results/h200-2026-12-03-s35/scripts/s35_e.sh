set -x
tar -C .dev -xJf .dev/cache35.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache35
source .dev/env.sh
git log --oneline -1; git status --short | head; date -u
(cd packages/chord-kernels && timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -4) | tee $OUT/kernels_gpu.log
(cd packages/chord-vllm && timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_core.py 2>&1 | tail -3) | tee $OUT/vllm_core.log
(cd packages/chord-bench && timeout 120 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -3) | tee $OUT/bench_gpu.log
date -u
timeout 120 compute-sanitizer --tool memcheck python3 .dev/s35/sanitize_rw.py 2>&1 | tail -12 | tee $OUT/memcheck.log
timeout 150 compute-sanitizer --tool racecheck python3 .dev/s35/sanitize_rw.py 2>&1 | tail -12 | tee $OUT/racecheck.log
date -u
