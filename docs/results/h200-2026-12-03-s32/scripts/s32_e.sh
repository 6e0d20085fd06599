set -x
tar -C .dev -xJf .dev/cache32f.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache32f
source .dev/env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
(cd packages/chord-bench && timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -2) | tee $OUT/gpu_bench_e.log
timeout 300 python3 -m chord_bench.layer --rounds 9 --scenarios tp8_512 tp8_4096 tp8_6144 tp8_8192 ep8_tok128 ep8_tok341 ep8_masked64 --out $OUT/layer_b 2>&1 | tail -12
