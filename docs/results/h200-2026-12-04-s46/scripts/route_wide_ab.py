# ruff: noqa
"""Session 46: the grouped contiguous mode's wide items (expected_m 121-150: 32-row blocks, up to five per item)
with their routing computed in the kernel (grouped.contiguous, now that their producer reads m_indices) against
the routing built by PyTorch ops in the timed call (as before this session) and built once outside it; the same
kernel, EP8 Kimi shapes, Poisson rows at 121 / 128 / 150 rows per expert, plus SiLU-and-mul gate_up at 128;
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
for per_expert in (121, 128, 150):
    for gname, (n, k), act in (("gate_up", (4096, 7168), None), ("down", (7168, 2048), None),
                               ("gate_up+silu", (4096, 7168), "silu")):
        if act and per_expert != 128:
            continue
        e = 48
        g = torch.Generator(device=dev).manual_seed(n + per_expert)
        ids = torch.randint(0, e, (e * per_expert,), generator=g, device=dev, dtype=torch.int32).view(-1, 1)
        layout = routing.contiguous_layout(ids, e)
        real = layout.row_slots >= 0
        m = layout.m_indices.numel()
        w = chord_kernels.pack("contiguous", *random_quantized(e, n, k, generator=g, device=dev), profile="h200_ep8")
        cfg = grouped.contiguous_config(w, m, layout.expected_m, "sm_90a")
        assert cfg is not None and cfg.reads_contiguous_rows, cfg
        grouped.prepare(w, expected_m=layout.expected_m, device=dev, activation=act)
        a = (torch.randn(m, k, generator=g, device=dev) * 0.5).to(torch.bfloat16)
        ws = indexed.new_workspace(indexed.max_workspace_bytes(w, device=dev) * 4, dev)
        bm = cfg.block_m
        n_out = n // 2 if act else n
        prebuilt = grouped.contiguous_routing(layout.m_indices, bm)
        outs = {t: torch.full((m, n_out), float("nan"), dtype=torch.bfloat16, device=dev) for t in ("kernel", "torch", "prebuilt")}
        kw = dict(block_m=bm, top_k=1, workspace=ws, block_rows=True, config=cfg, activation=act)
        fns = {"kernel": lambda: grouped.contiguous(a, w, layout.m_indices, out=outs["kernel"], workspace=ws,
                                                    expected_m=layout.expected_m, activation=act),
               "torch": lambda: run_gemm(a, w, grouped.contiguous_routing(layout.m_indices, bm), out=outs["torch"], **kw),
               "prebuilt": lambda: run_gemm(a, w, prebuilt, out=outs["prebuilt"], **kw)}
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
        res.append({"per_expert": per_expert, "expected_m": layout.expected_m, "gemm": gname, "m": m, "config": str(cfg),
                    "us": runs, "same": same, "nan_or_padding_written": nan})
        print(f"{per_expert:4d} {gname:12s} kernel " + " ".join(f"{x['kernel']:7.1f}" for x in runs)
              + " | torch " + " ".join(f"{x['torch'] - x['kernel']:+5.1f}" for x in runs)
              + " | prebuilt " + " ".join(f"{x['prebuilt'] - x['kernel']:+5.1f}" for x in runs) + " µs"
              + ("" if same and not nan else " DIFF/NAN"), flush=True)
        json.dump(res, open(f"{OUT}/route_wide_ab.json", "w"), indent=1)
