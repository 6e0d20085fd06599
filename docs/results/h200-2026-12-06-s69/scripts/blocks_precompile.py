# ruff: noqa
"""Session 69: compile the layer kernels blocks_ab.py launches (EP=1: EP8) at these tokens and BLOCKS."""
import math, os, sys, types
from concurrent.futures import ThreadPoolExecutor
from chord_kernels.indexed import api
EP = os.environ.get("EP") == "1"
E, G, TOP_K, H, I = (48, 384, 8, 7168, 2048) if EP else (384, 384, 8, 7168, 256)
prof = "h200_ep8" if EP else "h200_tp8"
w13 = types.SimpleNamespace(n=2 * I, k=H, num_experts=E, profile=prof, small_scales=True)
w2 = types.SimpleNamespace(n=H, k=I, num_experts=E, profile=prof, small_scales=True)
ks = {}
for tokens in map(int, sys.argv[1].split(",")):
    slots = tokens * TOP_K * E // G
    tok_e = tokens * TOP_K / G
    for bm in map(int, os.environ["BLOCKS"].split(",")):
        for cap in range(slots // bm, slots // bm + E + 2):
            in_order = api.both_on_wgmma(w13, w2, bm, cap, 132, "sm_90a", tok_e)
            for k in (api.launch_plan(w13, bm, cap, 132, "sm_90a", tok_e=tok_e, activation="silu").config.kernel(),
                      api.launch_plan(w2, bm, cap, 132, "sm_90a", tok_e=tok_e, block_rows=in_order).config.kernel()):
                ks[(k.source, k.flags)] = k
with ThreadPoolExecutor(2) as ex:
    list(ex.map(lambda kk: kk.compile("sm_90a"), ks.values()))
print(len(ks), "kernels")
