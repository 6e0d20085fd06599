# Session 80 call d (carry [".dev/s80", ".whl"]): on an H200, the committed kernels' bench and layer (s80_b.sh, the
# working tree's experimental header put back first). On an H100: pre_ab.py, the K groups' weight words read ahead
# (-DCHORD_EXP_PRELOAD) against the plan, bit for bit and timed (EP8 16 / 43 / 128 / 341 rows per expert, TP8 1024 / 8192).
case "$(nvidia-smi --query-gpu=name --format=csv,noheader)" in
  *H200*) git checkout HEAD -- packages/chord-kernels/src/chord_kernels/include/chord/indexed/wgmma.cuh; exec bash .dev/s80/s80_b.sh;;
esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$(pwd)/packages/chord-kernels/src:$(pwd)/packages/chord-bench/src PYTHONUNBUFFERED=1 OUT
mkdir -p .dev/cache80p; tar -C .dev/cache80p -xJf .dev/s80/pre/cache80p.tar.xz
export CHORD_CACHE_DIR=$(pwd)/.dev/cache80p
date -u; nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout ${PT:-420} python3 .dev/s80/pre_ab.py time ${SHAPES:-ep16,ep43,ep128,ep341,tp1024,tp8192} 2>&1 | grep -v Warning
date -u
