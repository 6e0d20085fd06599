# Session 80 call e (carry [".dev/s80", ".whl"]): on an H200, the committed kernels' bench and layer (s80_b.sh). Else the
# SASS of three planned WGMMA configurations with and without -DCHORD_EXP_PRELOAD (cubins compiled here).
case "$(nvidia-smi --query-gpu=name --format=csv,noheader)" in
  *H200*) git checkout HEAD -- packages/chord-kernels/src/chord_kernels/include/chord/indexed/wgmma.cuh; exec bash .dev/s80/s80_b.sh;;
esac
D=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1); echo "cuobjdump: $D"
for f in .dev/s80/pre/sass/*.cubin; do $D -sass $f | grep -E "^ +/\*[0-9a-f]{4}\*/" | sed -E 's#^ +/\*[0-9a-f]+\*/ +##; s/ *;.*$//; s/ +/ /g' > $OUT/$(basename $f .cubin).sass; done
cd $OUT && wc -l *.sass && tar -cJf sass.tar.xz *.sass && rm *.sass && ls -la
