# ruff: noqa
"""Session 44 (CPU): ptxas (nvcc 13.0, -Xptxas -v) on TP8's down runs of N tiles at 48- and 56-token blocks in
routing order: the plan (row widths 8 tokens less, 208 consumer registers) and its neighbours; C751x = serialized wgmmas."""
import sys, subprocess, tempfile, pathlib, dataclasses
from concurrent.futures import ThreadPoolExecutor
from chord_kernels.indexed.wgmma import WgmmaConfig
import chord_kernels
inc = pathlib.Path(chord_kernels.__file__).parent / "include"
base = dict(mt=2, bk=256, stages=4, items=1, dynamic=False, n_run=7, pingpong=True, subnormal=True, tma_rows=True)
V = {}
for bm in (48, 56):
    V[f"{bm} plan rw208"] = WgmmaConfig(block_m=bm, consumer_regs=208, row_widths=((40,) if bm == 48 else (48,)), **base)
    V[f"{bm} rw216"] = WgmmaConfig(block_m=bm, consumer_regs=216, row_widths=((40,) if bm == 48 else (48,)), **base)
    V[f"{bm} no-rw208"] = WgmmaConfig(block_m=bm, consumer_regs=208, **base)
    V[f"{bm} no-rw216"] = WgmmaConfig(block_m=bm, consumer_regs=216, **base)
    V[f"{bm} rw208 shift"] = WgmmaConfig(block_m=bm, consumer_regs=208, row_widths=((40,) if bm == 48 else (48,)), shift_pairs=True, **base)
    V[f"{bm} rw224"] = WgmmaConfig(block_m=bm, consumer_regs=224, row_widths=((40,) if bm == 48 else (48,)), **base)
def comp(item):
    name, c = item
    d = tempfile.mkdtemp()
    open(f"{d}/k.cu", "w").write(c.source())
    r = subprocess.run(["nvcc", "-O3", "-std=c++17", "-cubin", "--expt-relaxed-constexpr", "-gencode=arch=compute_90a,code=sm_90a", "-Xptxas", "-v", f"-I{inc}", f"{d}/k.cu", "-o", f"{d}/k.cubin"], capture_output=True, text=True)
    out = r.stderr
    sp = [l.strip() for l in out.splitlines() if "spill" in l]
    return f"{name:16s} C751x={'C751' in out} {sp[0] if sp else ''} rc={r.returncode}"
with ThreadPoolExecutor(2) as ex:
    for line in ex.map(comp, V.items()):
        print(line, flush=True)
