set -x
tar -C .dev -xJf .dev/cache30b.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache30b
source .dev/env.sh
git log --oneline | head -1
(cd packages/chord-vllm && timeout 90 python3 -m pytest -q -p no:cacheprovider tests/test_core.py 2>&1 | tail -2) | tee $OUT/gpu_vllm_final.log
timeout 300 python3 -m chord_bench.layer --rounds 9 --scenarios tp8_512 tp8_4096 tp8_6144 tp8_8192 ep8_tok128 ep8_tok341 ep8_masked64 --out $OUT/layer_b 2>&1 | tail -12
