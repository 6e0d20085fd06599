set -x
mkdir -p .dev/cache46 && tar -C .dev -xJf .dev/cache46.tar.xz && tar -C .dev -xJf .dev/cache46w16.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache46
source .dev/env.sh
date -u
(cd packages/chord-kernels && timeout 150 python3 -m pytest -m gpu -q -x -p no:cacheprovider tests/test_grouped_gpu.py 2>&1 | tail -3) | tee $OUT/gpu_grouped_f.log
timeout 150 python3 -m chord_bench --quick --scenarios 'ep8_*' 'tp8_*' --impls chord-indexed,chord-grouped --peer humming-kernels --no-plot --out $OUT/bench_f 2>&1 | tail -16 | cut -c1-250
date -u
date -u
timeout 40 python3 .dev/s46/sanitize_contig.py 2>&1 | tail -2
timeout 90 compute-sanitizer --tool memcheck python3 .dev/s46/sanitize_contig.py 2>&1 | grep -v 'Host Frame' | tail -4 | tee $OUT/memcheck_contig_f.log
timeout 120 compute-sanitizer --tool racecheck python3 .dev/s46/sanitize_contig.py > $OUT/racecheck_contig_full_f.log 2>&1; grep -c 'Race reported' $OUT/racecheck_contig_full_f.log; grep 'wgmma.cuh\|ptx.cuh\|epilogue.cuh\|routing.cuh' $OUT/racecheck_contig_full_f.log | sed 's/.*in \([a-z_]*\.cuh:[0-9]*\).*/\1/' | sort | uniq -c; tail -2 $OUT/racecheck_contig_full_f.log
date -u
