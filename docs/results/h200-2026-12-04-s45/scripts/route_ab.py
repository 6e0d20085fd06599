# ruff: noqa
"""Session 45: the grouped contiguous mode with its routing computed in the kernel (grouped.contiguous) against
the routing built by PyTorch ops in the timed call (grouped.contiguous_routing, as before this session) and built
once outside it; EP8 Kimi shapes, exactly 128 / 256 / 512 rows per expert and EP8 341 routed contiguously,
interleaved, five timings, real rows compared bit for bit."""
import json, os

import torch
import chord_kernels
from chord_kernels import grouped, indexed, routing
from chord_kernels.indexed.api import run_gemm
from chord_kernels.formats import random_quantized
from chord_bench.timing import interleaved

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
res = []
for name, kind, val in (("contig128", "exact", 128), ("contig256", "exact", 256), ("contig512", "exact", 512),
                        ("tok341", "poisson", 16368)):
    for gname, (n, k) in (("gate_up", (4096, 7168)), ("down", (7168, 2048))):
        g = torch.Generator(device=dev).manual_seed(n + val)
        e = 48
        if kind == "exact":
            ids = torch.arange(e, device=dev, dtype=torch.int32).repeat_interleave(val)
        else:
            ids = torch.randint(0, e, (val,), generator=g, device=dev, dtype=torch.int32)
        ids = ids[torch.randperm(ids.numel(), generator=g, device=dev)].view(-1, 1).contiguous()
        layout = routing.contiguous_layout(ids, e)
        real = layout.row_slots >= 0
        m = layout.m_indices.numel()
        w = chord_kernels.pack("contiguous", *random_quantized(e, n, k, generator=g, device=dev), profile="h200_ep8")
        grouped.prepare(w, device=dev)
        a = (torch.randn(m, k, generator=g, device=dev) * 0.5).to(torch.bfloat16)
        ws = indexed.new_workspace(indexed.max_workspace_bytes(w, device=dev) * 4, dev)
        bm = grouped.contiguous_block_m("sm_90a")
        prebuilt = grouped.contiguous_routing(layout.m_indices, bm)
        outs = {t: torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=dev) for t in ("kernel", "torch", "prebuilt")}
        fns = {"kernel": lambda: grouped.contiguous(a, w, layout.m_indices, out=outs["kernel"], workspace=ws),
               "torch": lambda: run_gemm(a, w, grouped.contiguous_routing(layout.m_indices, bm), block_m=bm, top_k=1,
                                         out=outs["torch"], workspace=ws, block_rows=True),
               "prebuilt": lambda: run_gemm(a, w, prebuilt, block_m=bm, top_k=1, out=outs["prebuilt"], workspace=ws,
                                            block_rows=True)}
        for f in fns.values():
            f()
        torch.cuda.synchronize()
        same = all(torch.equal(outs["kernel"][real], o[real]) for o in outs.values())
        nan = bool(outs["kernel"][real].isnan().any()) or not bool(outs["kernel"][~real].isnan().all())
        runs = []
        for rep in range(5):
            order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
            tm = interleaved({t: fns[t] for t in order}, rounds=11)
            runs.append({t: tm[t].median_us() for t in fns})
        res.append({"name": name, "gemm": gname, "m": m, "us": runs, "same": same, "nan_or_padding_written": nan})
        print(f"{name:10s} {gname:7s} kernel " + " ".join(f"{x['kernel']:7.1f}" for x in runs)
              + " | torch " + " ".join(f"{x['torch'] - x['kernel']:+5.1f}" for x in runs)
              + " | prebuilt " + " ".join(f"{x['prebuilt'] - x['kernel']:+5.1f}" for x in runs) + " µs"
              + ("" if same and not nan else " DIFF/NAN"), flush=True)
        json.dump(res, open(f"{OUT}/route_ab.json", "w"), indent=1)
