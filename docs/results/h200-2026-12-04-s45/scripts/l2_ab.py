# ruff: noqa
"""Session 45: the weights' L2 policy (evict-first, the plan) against evict-normal and evict-last at the
prefill shapes, where an expert's weights are read by several work items. Each GEMM as the layer runs it
(gate_up output in routing order, the down from routing-order rows), interleaved, three timings, outputs
compared bit for bit. Variants are the planned configurations compiled against patched header copies
(.dev/s45/inc_*). argv: precompile [threads] | time [cases]."""
import dataclasses, functools, json, os, sys, types

import torch
import chord_kernels
from chord_kernels import indexed
from chord_kernels.indexed import wgmma as W
from chord_kernels.indexed.api import run_gemm, _tma_rows_twin
from chord_kernels.indexed.planner import cached_plan, config_for_rows, weight_config
from chord_kernels.jit.kernel import CudaKernel
from chord_kernels.routing import align_block_size
from chord_kernels.formats import random_quantized

CASES = {"ep8_tok16": (48, 768, 1), "ep8_tok43": (48, 2064, 1), "ep8_tok128": (48, 6144, 1), "ep8_tok341": (48, 16368, 1),
         "tp8_8192": (384, 8192, 8)}
SHAPES = {"ep8": ((4096, 7168), (7168, 2048)), "tp8": ((512, 7168), (7168, 256))}
VARIANTS = ({"wF": ".dev/s45/inc_wF"} if os.environ.get("L2_VARIANTS") == "wF" else
            {"wN": ".dev/s45/inc_wN", "wL": ".dev/s45/inc_wL"})  # wF: session 44's evict-first headers


@dataclasses.dataclass(frozen=True)
class IncCfg(W.WgmmaConfig):
    inc: str = ""

    def kernel(self):
        return _kernel(self)


@functools.cache
def _kernel(cfg):
    base = W.WgmmaConfig(**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(W.WgmmaConfig)})
    return CudaKernel(name="indexed_wgmma", source=base.source(), entry=W.ENTRY, arch=W.ARCH, flags=("-I", cfg.inc))


def planned(n, k, e, prof, bm, cap, tok_e, block_rows):
    w = types.SimpleNamespace(n=n, k=k, num_experts=e, profile=prof, small_scales=True)
    c = cached_plan(n, k, bm, cap, 132, "sm_90a", config_for_rows(n, k, bm, "sm_90a", tok_e)).config
    c = weight_config(c, w)
    return _tma_rows_twin(c) if block_rows else c


def variants(c):
    return {tag: IncCfg(**dataclasses.asdict(c), inc=inc) for tag, inc in VARIANTS.items()}


if sys.argv[1] == "precompile":
    from concurrent.futures import ThreadPoolExecutor
    ks = []
    for name, (e, tokens, top_k) in CASES.items():
        (n1, k1), (n2, k2) = SHAPES[name[:3]]
        prof = "h200_ep8" if e == 48 else "h200_tp8"
        g = torch.Generator().manual_seed(1)
        ids = torch.rand(tokens, e, generator=g).topk(top_k, dim=1).indices.to(torch.int32)
        slots, tok_e = tokens * top_k, tokens * top_k / e
        w13 = types.SimpleNamespace(n=n1, k=k1, num_experts=e, profile=prof, small_scales=True)
        bm = indexed.choose_block_m(w13, slots)
        r = align_block_size(ids, bm, e)
        cap = indexed.routing_capacity(r.sorted_token_ids, r.expert_ids, bm)
        for n, k, br in ((n1, k1, False), (n2, k2, True)):
            c = planned(n, k, e, prof, bm, cap, tok_e, br)
            print(name, n, k, bm, cap, c)
            ks += [v.kernel() for v in variants(c).values()]
    for rows in (256, 512):
        for n, k in SHAPES["ep8"]:
            c = planned(n, k, 48, "h200_ep8", 64, 48 * rows // 64, rows, True)
            print("contig", rows, n, k, c)
            ks += [v.kernel() for v in variants(c).values()]
    with ThreadPoolExecutor(int(sys.argv[2]) if len(sys.argv) > 2 else 2) as ex:
        list(ex.map(lambda kk: kk.compile("sm_90a"), ks))
    print(len(ks), "kernels")
    sys.exit(0)

from chord_bench.timing import interleaved

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
NCU = sys.argv[1] == "ncu"  # ncu CASE GEMM: each variant once more after the warm-up, in order plan, wN, wL
names = sys.argv[2].split(",") if len(sys.argv) > 2 else list(CASES)
res = []
GROUPED = {"contig256": 256, "contig512": 512}
for name in names:
    if name in GROUPED:
        from chord_kernels import grouped, routing
        from chord_kernels.grouped.api import contiguous_routing
        e, rows = 48, GROUPED[name]
        for gname, (n, k) in zip(("gate_up", "down"), SHAPES["ep8"]):
            g = torch.Generator(device=dev).manual_seed(n + rows)
            ids = torch.arange(e, device=dev, dtype=torch.int32).repeat_interleave(rows)
            ids = ids[torch.randperm(ids.numel(), generator=g, device=dev)].view(-1, 1).contiguous()
            layout = routing.contiguous_layout(ids, e)
            real = layout.row_slots >= 0
            m = layout.m_indices.numel()
            w = chord_kernels.pack("contiguous", *random_quantized(e, n, k, generator=g, device=dev), profile="h200_ep8")
            grouped.prepare(w, device=dev)
            a = (torch.randn(m, k, generator=g, device=dev) * 0.5).to(torch.bfloat16)
            ws = indexed.new_workspace(indexed.max_workspace_bytes(w, device=dev) * 4, dev)
            route = contiguous_routing(layout.m_indices, 64)
            cap = m // 64
            plan = planned(n, k, e, "h200_ep8", 64, cap, rows, True)
            outs = {t: torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=dev) for t in ("plan", *VARIANTS)}
            fns = {"plan": lambda: grouped.contiguous(a, w, layout.m_indices, out=outs["plan"], workspace=ws)}
            for tag, c in variants(plan).items():
                fns[tag] = lambda out=outs[tag], c=c: run_gemm(a, w, route, block_m=64, top_k=1, out=out, config=c,
                                                              workspace=ws, block_rows=True)
            for f in fns.values():
                f()
            torch.cuda.synchronize()
            same = all(torch.equal(outs["plan"][real], o[real]) for o in outs.values())
            nan = bool(outs["plan"][real].isnan().any())
            runs = []
            for rep in range(int(os.environ.get("REPS", "3"))):
                order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
                tm = interleaved({t: fns[t] for t in order}, rounds=int(os.environ.get("ROUNDS", "7")))
                runs.append({t: tm[t].median_us() for t in fns})
            res.append({"name": name, "gemm": gname, "block_m": 64, "config": str(plan), "us": runs, "same": same, "nan": nan})
            print(f"{name:11s} {gname:7s} plan " + " ".join(f"{x['plan']:7.1f}" for x in runs)
                  + "".join(f" | {t} " + " ".join(f"{x[t] / x['plan'] - 1:+.1%}" for x in runs) for t in fns if t != "plan")
                  + ("" if same and not nan else " DIFF/NAN"), flush=True)
            json.dump(res, open(f"{OUT}/l2_ab.json", "w"), indent=1)
        continue
    e, tokens, top_k = CASES[name]
    (n1, k1), (n2, k2) = SHAPES[name[:3]]
    prof = "h200_ep8" if e == 48 else "h200_tp8"
    g = torch.Generator(device=dev).manual_seed(tokens * 7 + e)
    w13 = chord_kernels.pack("indexed", *random_quantized(e, n1, k1, generator=g, device=dev), profile=prof)
    w2 = chord_kernels.pack("indexed", *random_quantized(e, n2, k2, generator=g, device=dev), profile=prof)
    ids = torch.rand(tokens, e, generator=g, device=dev).topk(top_k, dim=1).indices.to(torch.int32).contiguous()
    tw = torch.rand(tokens, top_k, generator=g, device=dev).reshape(-1).contiguous()
    slots, tok_e = tokens * top_k, tokens * top_k / e
    a1 = (torch.randn(tokens, k1, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    bm = indexed.choose_block_m(w13, slots)
    r = align_block_size(ids, bm, e)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    cap = indexed.routing_capacity(r.sorted_token_ids, r.expert_ids, bm)
    a2 = (torch.randn(cap * bm, k2, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    ws = indexed.new_workspace(max(indexed.max_workspace_bytes(w13, device=dev), indexed.max_workspace_bytes(w2, device=dev)) * 4, dev)
    for gname, w, br in (("gate_up", w13, False), ("down", w2, True)):
        if NCU and gname != sys.argv[3]:
            continue
        plan = planned(w.n, w.k, e, prof, bm, cap, tok_e, br)
        cfgs = {"plan": None, **variants(plan)}
        outs, fns = {}, {}
        for tag, c in cfgs.items():
            if gname == "gate_up":
                outs[tag] = torch.full((cap * bm, w.n), float("nan"), dtype=torch.bfloat16, device=dev)
                fns[tag] = lambda out=outs[tag], c=c: run_gemm(a1, w, route, block_m=bm, top_k=top_k, out=out, config=c,
                                                              workspace=ws, tok_e=tok_e, out_position=True)
            else:
                outs[tag] = torch.full((slots, w.n), float("nan"), dtype=torch.bfloat16, device=dev)
                fns[tag] = lambda out=outs[tag], c=c: run_gemm(a2, w, route, block_m=bm, top_k=1, topk_weights=tw, out=out,
                                                              config=c, workspace=ws, tok_e=tok_e, block_rows=True,
                                                              num_slots=slots)
        for f in fns.values():
            f()
        torch.cuda.synchronize()
        if NCU:
            for f in fns.values():  # launches 3, 4, 5 (after the three above): ncu --launch-skip 3 --launch-count 3
                f()
            torch.cuda.synchronize()
            continue
        if gname == "gate_up":
            sid = r.sorted_token_ids[:cap * bm].long()
            real = sid < slots
            same = all(torch.equal(outs["plan"][real], o[real]) for o in outs.values())
            nan = bool(outs["plan"][real].isnan().any())
        else:
            same = all(torch.equal(outs["plan"], o) for o in outs.values())
            nan = bool(outs["plan"].isnan().any())
        runs = []
        for rep in range(int(os.environ.get("REPS", "3"))):
            order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
            tm = interleaved({t: fns[t] for t in order}, rounds=int(os.environ.get("ROUNDS", "7")))
            runs.append({t: tm[t].median_us() for t in fns})
        res.append({"name": name, "gemm": gname, "block_m": bm, "config": str(plan), "us": runs, "same": same, "nan": nan})
        print(f"{name:11s} {gname:7s} plan " + " ".join(f"{x['plan']:7.1f}" for x in runs)
              + "".join(f" | {t} " + " ".join(f"{x[t] / x['plan'] - 1:+.1%}" for x in runs) for t in fns if t != "plan")
              + ("" if same and not nan else " DIFF/NAN"), flush=True)
        json.dump(res, open(f"{OUT}/l2_ab.json", "w"), indent=1)
