set -x
mkdir -p .dev/cache46 && tar -C .dev -xJf .dev/cache46.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache46
source .dev/env.sh
date -u
(cd packages/chord-kernels && timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -3) | tee $OUT/gpu_kernels_b.log
(cd packages/chord-bench && timeout 100 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -2) | tee $OUT/gpu_bench_b.log
(cd packages/chord-vllm && timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_core.py 2>&1 | tail -2) | tee $OUT/gpu_vllm_b.log
date -u
timeout 60 python3 .dev/s46/sanitize_contig.py 2>&1 | tail -2
timeout 120 compute-sanitizer --tool memcheck python3 .dev/s46/sanitize_contig.py 2>&1 | grep -v 'Host Frame' | tail -6 | tee $OUT/memcheck_contig_b.log
timeout 200 compute-sanitizer --tool racecheck python3 .dev/s46/sanitize_contig.py > $OUT/racecheck_contig_full_b.log 2>&1; grep -c 'Race reported' $OUT/racecheck_contig_full_b.log; grep 'wgmma.cuh\|ptx.cuh\|epilogue.cuh\|routing.cuh' $OUT/racecheck_contig_full_b.log | sed 's/.*in \([a-z_]*\.cuh:[0-9]*\).*/\1/' | sort | uniq -c; tail -2 $OUT/racecheck_contig_full_b.log
date -u
