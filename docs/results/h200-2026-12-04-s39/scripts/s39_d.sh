set -x
tar -C .dev -xJf .dev/cache39g.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache39g
source .dev/env.sh
git log --oneline -1; git status --short | head -8; date -u
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
mkdir -p $OUT/bench_d $OUT/layer_d
timeout 120 python3 -m chord_bench --quick --scenarios ep8_masked8 --impls chord-grouped --peer humming-kernels --no-plot --out $OUT/bench_d 2>&1 | tail -4
date -u
timeout 150 python3 -m chord_bench.layer --rounds 9 --scenarios ep8_tok8 ep8_masked8 --out $OUT/layer_d 2>&1 | tail -12
date -u
(cd packages/chord-kernels && timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -6)
date -u
(cd packages/chord-vllm && timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_core.py 2>&1 | tail -3)
(cd packages/chord-bench && timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -3)
date -u
