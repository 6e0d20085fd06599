# Session 69 call c (main's kernels again, session 68's cache): the top-k-sum GPU file with -0 top-k weights;
# EP8's layer at 150-157 rows per expert on the wide 24-token items against the planned 96 (blocks_ab.py);
# ncu's DRAM bytes of TP8 8192's layer.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1
mkdir -p .dev/cache68; tar -C .dev/cache68 -xJf .dev/s68/cache68.tar.xz; export CHORD_CACHE_DIR=$(pwd)/.dev/cache68
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.sm,power.draw --format=csv,noheader
(cd packages/chord-kernels && timeout 200 python3 ../../.dev/s69/precompile_topk_tests.py 2>&1 | grep -v Warning | tail -2
 timeout 200 python3 -m pytest -q -m gpu -n 2 -p no:cacheprovider -rf tests/test_indexed_topk_sum_gpu.py > $OUT/tests_c.log 2>&1; tail -3 $OUT/tests_c.log)
date -u
EP=1 BLOCKS=96,24 TAG=_ep8w timeout 240 python3 .dev/s68/blocks_ab.py time ${TOKENS:-7200,7248,7296,7344,7392,7440,7488,7536} 2>&1 | grep -v Warning
date -u
timeout 100 ncu --clock-control none --profile-from-start off --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed --csv python3 .dev/s69/ncu_layer.py tp8_8192 > $OUT/tp8_bytes.csv 2>&1; grep -v "^==" $OUT/tp8_bytes.csv | cut -c1-220 | tail -16
date -u
