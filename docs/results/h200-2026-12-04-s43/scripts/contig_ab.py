# ruff: noqa
"""Session 43: the grouped contiguous mode's routing blocks of 32 rows in wide items (up to five blocks of one
expert, 160 tokens, 128-K activation stages, the weights in their own ring of 256-K tiles, tensor copies)
against the plan (64-row blocks, two per item, 256-K stages), one GEMM at a time, interleaved, three
timings; the real rows compared bit for bit. argv: precompile [threads] | time."""
import dataclasses, json, math, os, sys

from chord_kernels.indexed import wgmma as W

N_K = {"gu": (4096, 7168), "gus": (4096, 7168), "dn": (7168, 2048)}  # gus: gate_up with SiLU-and-mul fused


def wide(n, k, widths):
    return W.WgmmaConfig(block_m=32, mt=2, bk=128, stages=3, items=5, weight_ring=True, dynamic=True,
                         widths=widths, consumer_regs=224, tma_rows=True, subnormal=True)


VARIANTS = {k: v for k, v in {"w45": (4, 5), "w345": (3, 4, 5), "w245": (2, 4, 5)}.items()
            if k in os.environ.get("VARIANTS", "w345,w245").split(",")}
# (name, experts, rows: "poisson:<total>" routed uniformly at random, or "exact:<per expert>")
CASES = [(f"tok{t}", 48, f"poisson:{48 * t}") for t in (110, 115, 120, 128, 135, 142, 150, 160, 170, 185)]
if os.environ.get("CALL") == "c":  # call c: these cases, VARIANTS=w45,w345,w245, no SiLU-fused gate_up
    CASES = [("tok128", 48, "poisson:6144"), ("contig128", 48, "exact:128"), ("tok100", 48, "poisson:4800"),
             ("tok150", 48, "poisson:7200"), ("contig256", 48, "exact:256"), ("tok341", 48, "poisson:16368")]
    N_K.pop("gus")

if sys.argv[1] == "precompile":
    from concurrent.futures import ThreadPoolExecutor
    ks = {}
    for g, (n, k) in N_K.items():
        for w in VARIANTS.values():
            c = wide(n, k, w)
            if g == "gus":
                c = dataclasses.replace(c, silu_mul=True)
            ks[c.kernel().source] = c.kernel()
    with ThreadPoolExecutor(int(sys.argv[2]) if len(sys.argv) > 2 else 2) as ex:
        list(ex.map(lambda kk: kk.compile("sm_90a"), ks.values()))
    print(len(ks), "kernels")
    sys.exit(0)

import torch
import chord_kernels
from chord_kernels import grouped, indexed, routing
from chord_kernels.grouped.api import contiguous_routing
from chord_kernels.indexed.api import run_gemm
from chord_kernels.formats import random_quantized
from chord_bench.timing import interleaved

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
ROUNDS = int(os.environ.get("ROUNDS", "7"))
DRAWS = int(os.environ.get("DRAWS", "1"))
res = []
for name, e, rows in CASES:
    for g_name, (n, k) in N_K.items():
        for draw in range(DRAWS):
            g = torch.Generator(device=dev).manual_seed(n + 17 * draw + hash(name) % 1000)
            kind, val = rows.split(":")
            if kind == "exact":
                ids = torch.arange(e, device=dev, dtype=torch.int32).repeat_interleave(int(val))
            else:
                ids = torch.randint(0, e, (int(val),), generator=g, device=dev, dtype=torch.int32)
            ids = ids[torch.randperm(ids.numel(), generator=g, device=dev)].view(-1, 1).contiguous()
            layout = routing.contiguous_layout(ids, e)
            real = layout.row_slots >= 0
            m = layout.m_indices.numel()
            w = chord_kernels.pack("contiguous", *random_quantized(e, n, k, generator=g, device=dev), profile="h200_ep8")
            grouped.prepare(w, device=dev, activation="silu" if g_name == "gus" else None)
            a = (torch.randn(m, k, generator=g, device=dev) * 0.5).to(torch.bfloat16)
            ws = indexed.new_workspace(indexed.max_workspace_bytes(w, device=dev) * 4, dev)
            outs, fns = {}, {}
            act = "silu" if g_name == "gus" else None
            width = n // 2 if act else n
            outs["plan"] = torch.full((m, width), float("nan"), dtype=torch.bfloat16, device=dev)
            fns["plan"] = lambda out=outs["plan"]: grouped.contiguous(a, w, layout.m_indices, out=out, workspace=ws,
                                                                      activation=act)
            route32 = contiguous_routing(layout.m_indices, 32)
            for tag, widths in VARIANTS.items():
                c = wide(n, k, widths)
                outs[tag] = torch.full((m, width), float("nan"), dtype=torch.bfloat16, device=dev)
                fns[tag] = lambda out=outs[tag], c=c: run_gemm(a, w, contiguous_routing(layout.m_indices, 32), block_m=32,
                                                            top_k=1, out=out, config=c, workspace=ws, block_rows=True,
                                                            activation=act)
            for f in fns.values():
                f()
            torch.cuda.synchronize()
            same = all(torch.equal(outs["plan"][real], o[real]) for o in outs.values())
            nan = any(bool(o[real].isnan().any()) for o in outs.values())
            counts = torch.bincount(ids.view(-1).long(), minlength=e)
            runs = []
            for rep in range(3):
                order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
                tm = interleaved({t: fns[t] for t in order}, rounds=ROUNDS)
                runs.append({t: tm[t].median_us() for t in fns})
            res.append({"name": name, "gemm": g_name, "draw": draw, "m": m, "rows_max": int(counts.max()),
                        "rows_min": int(counts.min()), "us": runs, "same": same, "nan": nan})
            print(f"{name:10s} {g_name} d{draw} m={m:6d} rows {int(counts.min())}-{int(counts.max())} plan "
                  + " ".join(f"{x['plan']:7.1f}" for x in runs)
                  + "".join(f" | {t} " + " ".join(f"{x[t] / x['plan'] - 1:+.1%}" for x in runs) for t in fns if t != "plan")
                  + ("" if same and not nan else " DIFF/NAN"), flush=True)
            json.dump(res, open(f"{OUT}/contig_ab.json", "w"), indent=1)
