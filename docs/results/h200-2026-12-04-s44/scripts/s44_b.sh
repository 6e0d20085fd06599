set -x
tar -C .dev -xJf .dev/cache44b.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache43
source .dev/env.sh
git log --oneline -1; git status --short | head; date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
timeout 360 python3 -m chord_bench --quick --scenarios ep8_tok16 ep8_tok43 ep8_tok128 ep8_tok341 tp8_1024 tp8_8192 --impls chord-indexed --peer humming-kernels --no-plot --out $OUT/bench_b 2>&1 | tail -12
date -u
OUT=$OUT timeout 60 python3 .dev/s44/probe.py ab tp8_8192 2>&1 | tee $OUT/probe_ab_b.log
(cd packages/chord-bench && timeout 100 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -3) | tee $OUT/gpu_bench_b.log
(cd packages/chord-kernels && timeout 60 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_indexed_gpu.py -k routing_order 2>&1 | tail -3) | tee $OUT/gpu_ro_b.log
date -u
