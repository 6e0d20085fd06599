# ruff: noqa
"""Session 26: EP8's down (K = 2048, N = 7168) with 384-channel N tiles (mt = 3: 19 N tiles per
block, 912 items at 48 experts: 6.9 waves instead of 10.2 — session 23's staircase), its K loop
committing per K step (row widths: per-group commits serialize it, C7512): E' experts with 16 rows
each (44, 47, 48: 9.33 / 9.97 / 10.18 waves planned, 6.33-6.91 with mt = 3), then ep8_tok16's
draw (as in deep.py) planned against mt = 3 and 24-token blocks. Interleaved CUDA
graphs, three timings; bit for bit against the planned configuration.
argv[1] == precompile: compile only."""
import dataclasses, json, os, re, sys
from pathlib import Path

from chord_kernels.indexed import planner as P
from chord_kernels.indexed.wgmma import WgmmaConfig

DOWN = P._rows_config(7168, 2048, 32, 16.0)
GATE = dataclasses.replace(P._rows_config(4096, 7168, 32, 16.0), silu_mul=True)
# Row widths make the K loop commit per K step: with per-group commits ptxas serializes mt = 3 (C7512).
MT3 = {"mt3_epi1_st3": dataclasses.replace(DOWN, mt=3, stages=3, epi_groups=1, row_widths=(24,)),
       "mt3_st2": dataclasses.replace(DOWN, mt=3, stages=2, row_widths=(24,)),
       "bm24_mt3_st3": dataclasses.replace(DOWN, block_m=24, mt=3, stages=3, row_widths=(16,))}
DOWN_E = (44, 47, 48)

if sys.argv[1:2] == ["precompile"]:
    from concurrent.futures import ThreadPoolExecutor
    from chord_kernels.jit import CudaKernel
    cfgs = [DOWN, GATE, P._rows_config(7168, 2048, 24, 0.0), *MT3.values()]
    ks = [CudaKernel(name="w_v", source=c.source(), entry=c.kernel().entry, arch="sm_90a", flags=("-Xptxas", "-v")) for c in cfgs]
    with ThreadPoolExecutor(int(sys.argv[2]) if len(sys.argv) > 2 else 2) as ex:
        list(ex.map(lambda c: c.kernel().compile("sm_90a"), cfgs))
        paths = list(ex.map(lambda k: k.compile("sm_90a"), ks))
    for c, p in zip(cfgs, paths):
        txt = Path(str(p).replace(".cubin", ".json")).read_text()
        print(c.block_m, c.mt, c.stages, c.epi_groups, "spill", re.findall(r"(\d+) bytes spill stores", txt), "C751", "C751" in txt,
              re.findall(r"Used (\d+) registers", txt))
    sys.exit(0)

import torch
import chord_kernels
from chord_kernels.indexed.api import run_gemm
from chord_kernels.formats import random_quantized
from chord_kernels.routing import align_block_size
from chord_bench.timing import GraphTimer

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
ROUNDS = int(os.environ.get("ROUNDS", "9"))
res = {"down_waves": [], "down_mt3": []}


def timed(fns, repeats=3):
    out = []
    for r in range(repeats):
        order = list(fns) if r % 2 == 0 else list(fns)[::-1]
        t = {k: GraphTimer(fns[k], launches=10) for k in order}
        for _ in range(ROUNDS):
            for k in order:
                t[k].run(3)
        out.append({k: t[k].median_us() for k in fns})
    return out


def weight(n, k, seed):
    g = torch.Generator(device=dev).manual_seed(seed)
    return chord_kernels.pack("indexed", *random_quantized(48, n, k, generator=g, device=dev), profile="h200_ep8")


def routed(active, rows, k, seed):
    """``rows`` tokens on each of the first ``active`` experts, shuffled; top-1."""
    g = torch.Generator(device=dev).manual_seed(seed)
    ids = torch.arange(active, device=dev, dtype=torch.int32).repeat_interleave(rows)
    ids = ids[torch.randperm(ids.numel(), generator=g, device=dev)].reshape(-1, 1).contiguous()
    a = (torch.randn(ids.shape[0], k, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    return a, ids


def launch(a, w, ids, cfg, silu=False, tw=None):
    r = align_block_size(ids, cfg.block_m, 48)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    out = torch.full((ids.numel(), w.n // 2 if silu else w.n), float("nan"), dtype=torch.bfloat16, device=dev)
    plain = dataclasses.replace(cfg, silu_mul=False)
    fn = lambda: run_gemm(a, w, route, block_m=cfg.block_m, top_k=1, out=out, config=plain, topk_weights=tw,
                          activation="silu" if silu else None, zero_nonlocal=False)
    return fn, out


w2 = weight(7168, 2048, 1)
fns, outs = {}, {}
for e in DOWN_E:
    a, ids = routed(e, 16, 2048, e)
    for tag, cfg in (("plan", DOWN), ("mt3", MT3["mt3_epi1_st3"])):
        fns[(e, tag)], outs[(e, tag)] = launch(a, w2, ids, cfg)
for f in fns.values():
    f()
torch.cuda.synchronize()
same = {e: torch.equal(outs[(e, "plan")], outs[(e, "mt3")]) for e in DOWN_E}
assert all(not o.isnan().any() for o in outs.values())
runs = timed({f"{e}/{t}": f for (e, t), f in fns.items()})
for e in DOWN_E:
    rec = {"experts": e, "items_plan": 28 * e, "items_mt3": 19 * e, "plan": [r[f"{e}/plan"] for r in runs],
           "mt3": [r[f"{e}/mt3"] for r in runs], "bit_identical": same[e]}
    res["down_waves"].append(rec)
    print(f"down  E'={e:2d} items {28 * e:4d} ({28 * e / 132:5.2f} waves) plan " + " ".join(f"{x:6.1f}" for x in rec["plan"])
          + f" | per expert {min(rec['plan']) / e:5.2f} | mt3 ({19 * e / 132:5.2f} waves) " + " ".join(f"{x:6.1f}" for x in rec["mt3"])
          + ("" if same[e] else " DIFF"), flush=True)
json.dump(res, open(f"{OUT}/waves.json", "w"), indent=1)

# ep8_tok16's down (as deep.py): 768 slots, uniform over 48 experts, top-k weights.
g = torch.Generator(device=dev).manual_seed(7168 + 2048 + 768)
w = weight(7168, 2048, 7168 + 2048 + 768)
a = (torch.randn(768, 2048, generator=g, device=dev) * 0.5).to(torch.bfloat16)
ids = torch.rand(768, 48, generator=g, device=dev).argsort(dim=1)[:, :1].to(torch.int32).contiguous()
tw = torch.rand(768, generator=g, device=dev)
cfgs = {"plan": DOWN, "bm24": P._rows_config(7168, 2048, 24, 0.0), **MT3}
fns, outs = {}, {}
for tag, cfg in cfgs.items():
    fns[tag], outs[tag] = launch(a, w, ids, cfg, tw=tw)
    fns[tag]()
torch.cuda.synchronize()
same = {t: torch.equal(outs["plan"], o) for t, o in outs.items()}
runs = timed(fns)
res["down_mt3"].append({"configs": {t: str(c) for t, c in cfgs.items()}, "us": runs, "bit_identical": same})
print("ep8_tok16 down plan " + " ".join(f"{r['plan']:6.1f}" for r in runs) + "".join(
    f" | {t} " + " ".join(f"{r[t] / r['plan'] - 1:+.1%}" for r in runs) + ("" if same[t] else " DIFF") for t in cfgs if t != "plan"), flush=True)
json.dump(res, open(f"{OUT}/waves.json", "w"), indent=1)
