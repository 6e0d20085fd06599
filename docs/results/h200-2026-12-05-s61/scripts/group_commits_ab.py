# ruff: noqa
"""Session 61 (prepared on the CPU, no GPU lent): the one-block items of 72-104 tokens and the 64 x 2 items as
planned (their K loop commits per K step; the one-block items' pairs shifted, the 64 x 2 items' row widths)
against the same items with whole K stages, whose K loop then commits per K group (pairs in place; the 64 x 2
items without row widths, which ptxas would serialize). Each GEMM as the layer runs it: gate_up with SiLU fused
writing routing order, EP8's down from routing-order rows by tensor copies with top-k weights (TP8's down runs
N tiles on four warpgroups: not affected); and the grouped contiguous mode's two GEMMs (contig*: exactly that
many rows on each of 48 experts, grouped.contiguous as planned against config=). Interleaved in one process,
three timings (listed, reversed, listed), outputs NaN-poisoned and compared bit for bit on the real rows.
argv: precompile [threads] | time [case,case,...]"""
import dataclasses, json, os, sys, types

import torch
from chord_kernels import indexed
from chord_kernels.indexed.api import launch_plan
from chord_kernels.indexed.planner import cached_plan, config_for_rows
from chord_kernels.indexed.wgmma import WgmmaConfig
from chord_kernels.routing import align_block_size

# name: (experts, tokens, top_k); TP8 is 384 experts at top 8, EP8 48 local experts at top 1 (tok_e rows each)
CASES = {"tp8_8192": (384, 8192, 8), "ep8_64": (48, 48 * 64, 1), "tp8_3072": (384, 3072, 8),
         "ep8_171": (48, 48 * 171, 1), "tp8_4096": (384, 4096, 8), "ep8_85": (48, 48 * 85, 1),
         "tp8_9216": (384, 9216, 8), "ep8_190": (48, 48 * 190, 1), "tp8_2560": (384, 2560, 8),
         "ep8_56": (48, 48 * 56, 1), "tp8_3584": (384, 3584, 8), "ep8_72": (48, 48 * 72, 1),
         "contig256": (48, 256, 0), "ep8_341": (48, 48 * 341, 1), "contig512": (48, 512, 0),
         "tp8_12288": (384, 12288, 8)}  # contig: (experts, rows on each, -)
SHAPES = {"ep8": ((4096, 7168), (7168, 2048)), "tp8": ((512, 7168), (7168, 256))}
ARCH, SMS = "sm_90a", 132


def base_config(n, k, bm, tok_e, cap):
    return cached_plan(n, k, bm, cap, SMS, ARCH, config_for_rows(n, k, bm, ARCH, tok_e)).config


def variant(cfg):
    """The same items with whole stages (per-K-group commits, pairs in place, items of several blocks without
    row widths), where cfg commits per step on two or three warpgroups (not runs, not the ring); else None."""
    if (isinstance(cfg, WgmmaConfig) and cfg.commit_per_step and not cfg.n_run and cfg.consumers <= 3
            and not cfg.weight_ring):
        v = dataclasses.replace(cfg, whole_stages=True, shift_pairs=False,
                                row_widths=cfg.row_widths if cfg.items == 1 else ())
        assert not v.commit_per_step
        return v
    return None


if sys.argv[1] == "precompile":  # on the CPU: every launch the time mode makes, both weights' scale forms
    from concurrent.futures import ThreadPoolExecutor
    ks = {}
    for name, (e, tokens, top_k) in CASES.items():
        if name.startswith("contig"):  # grouped.contiguous: 128-row segments, 64-row blocks, no tok_e of its own
            m = e * tokens
            for small in (True, False):
                for n, k, act in ((4096, 7168, "silu"), (7168, 2048, None)):
                    w = types.SimpleNamespace(n=n, k=k, num_experts=e, profile="h200_ep8", small_scales=small)
                    base = base_config(n, k, 64, m / e, m // 64)
                    for c in (None, base, variant(base)):
                        lc = launch_plan(w, 64, m // 64, SMS, ARCH, config=c, tok_e=m / e, activation=act,
                                         block_rows=True).config
                        ks[lc.kernel().source] = lc.kernel()
            continue
        (n1, k1), (n2, k2) = SHAPES[name[:3]]
        prof = "h200_ep8" if e == 48 else "h200_tp8"
        slots, tok_e = tokens * top_k, tokens * top_k / e
        for small in (True, False):
            w13 = types.SimpleNamespace(n=n1, k=k1, num_experts=e, profile=prof, small_scales=small)
            w2 = types.SimpleNamespace(n=n2, k=k2, num_experts=e, profile=prof, small_scales=small)
            bm = indexed.choose_block_m(w13, slots)
            for w, act, rows in ((w13, "silu", False), (w2, None, True)):
                for cap in range(slots // bm, slots // bm + e + 2):  # the capacity a draw may give: the plan's grid
                    base = base_config(w.n, w.k, bm, tok_e, cap)
                    for c in (base, variant(base)):
                        if c is not None:
                            lc = launch_plan(w, bm, cap, SMS, ARCH, config=c, activation=act, block_rows=rows).config
                            ks[lc.kernel().source] = lc.kernel()
    with ThreadPoolExecutor(int(sys.argv[2]) if len(sys.argv) > 2 else 2) as ex:
        list(ex.map(lambda kk: kk.compile(ARCH), ks.values()))
    print(len(ks), "kernels")
    sys.exit(0)

import chord_kernels
from chord_kernels.formats import random_quantized
from chord_kernels.indexed.api import run_gemm
from chord_bench.timing import interleaved

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
names = sys.argv[2].split(",") if len(sys.argv) > 2 else list(CASES)
res = []
def contig_case(name, e, rows):
    """grouped.contiguous's two GEMMs on exactly `rows` rows per expert: as planned against the variant."""
    from chord_kernels import grouped, routing
    g = torch.Generator(device=dev).manual_seed(rows * 11 + e)
    ids = torch.arange(e, device=dev, dtype=torch.int32).repeat_interleave(rows)
    ids = ids[torch.randperm(ids.numel(), generator=g, device=dev)].view(-1, 1).contiguous()
    layout = routing.contiguous_layout(ids, e)
    m = layout.m_indices.numel()
    real = layout.row_slots >= 0
    ws = indexed.new_workspace(64 << 20, dev)
    fns, outs, cfgs = {}, {}, {}
    for gname, (n, k, act) in (("gu", (4096, 7168, "silu")), ("dn", (7168, 2048, None))):
        w = chord_kernels.pack("contiguous", *random_quantized(e, n, k, generator=g, device=dev), profile="h200_ep8")
        grouped.prepare(w, device=dev)
        a = (torch.randn(m, k, generator=g, device=dev) * 0.5).to(torch.bfloat16)
        var = variant(base_config(n, k, 64, m / e, m // 64))
        for tag, c in (("plan", None), ("group", var)):
            key = f"{gname}_{tag}"
            cfgs[key] = str(c)
            outs[key] = torch.full((m, n // 2 if act else n), float("nan"), dtype=torch.bfloat16, device=dev)
            fns[key] = lambda o=outs[key], c=c, a=a, w=w, act=act: grouped.contiguous(
                a, w, layout.m_indices, out=o, workspace=ws, activation=act, config=c)
    return fns, outs, cfgs, real, 64, m // 64


for name in names:
    e, tokens, top_k = CASES[name]
    if name.startswith("contig"):
        fns, outs, cfgs, real_rows, bm, cap = contig_case(name, e, tokens)
        for f in fns.values():
            f()
        torch.cuda.synchronize()
        same = {gn: bool(torch.equal(outs[f"{gn}_plan"][real_rows], outs[f"{gn}_group"][real_rows])) for gn in ("gu", "dn")}
        nans = {gn: bool(outs[f"{gn}_plan"][real_rows].isnan().any() or outs[f"{gn}_group"][real_rows].isnan().any())
                for gn in ("gu", "dn")}
        runs = []
        for rep in range(3):
            order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
            tm = interleaved({t: fns[t] for t in order}, rounds=int(os.environ.get("ROUNDS", "7")))
            runs.append({t: tm[t].median_us() for t in fns})
        res.append({"name": name, "block_m": bm, "capacity": cap, "configs": cfgs, "same": same, "nan": nans, "us": runs})
        for gname in ("gu", "dn"):
            print(f"{name:9s} {gname} bm {bm:3d} same {same[gname]} nan {nans[gname]} | plan "
                  + " ".join(f"{x[gname + '_plan']:7.1f}" for x in runs) + " | per-K-group "
                  + " ".join(f"{x[gname + '_group'] / x[gname + '_plan'] - 1:+.1%}" for x in runs), flush=True)
        json.dump(res, open(f"{OUT}/group_commits_ab.json", "w"), indent=1)
        continue
    (n1, k1), (n2, k2) = SHAPES[name[:3]]
    g = torch.Generator(device=dev).manual_seed(tokens * 7 + e)
    prof = "h200_ep8" if e == 48 else "h200_tp8"
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
    cap_rows = cap * bm
    sid = r.sorted_token_ids.long()[:cap_rows]
    real = sid < slots
    a2_ro = (torch.randn(cap_rows, k2, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    ws = indexed.new_workspace(max(indexed.max_workspace_bytes(w13, device=dev),
                                   indexed.max_workspace_bytes(w2, device=dev)) * 4, dev)
    fns, outs, cfgs = {}, {}, {}
    nan = float("nan")
    gemms = [("gu", w13, "silu")] + ([("dn", w2, None)] if name.startswith("ep8") else [])
    for gname, w, act in gemms:
        base = base_config(w.n, w.k, bm, tok_e, cap)
        var = variant(base)
        if var is None:
            print(name, gname, "not a one-block per-step item:", base, flush=True)
            continue
        for tag, c in (("plan", base), ("group", var)):
            key = f"{gname}_{tag}"
            cfgs[key] = str(launch_plan(w, bm, cap, SMS, ARCH, config=c, activation=act, block_rows=gname == "dn").config)
            if gname == "gu":
                outs[key] = torch.full((cap_rows, w.n // 2), nan, dtype=torch.bfloat16, device=dev)
                fns[key] = lambda o=outs[key], c=c: run_gemm(a1, w13, route, block_m=bm, top_k=top_k, out=o, config=c,
                                                             workspace=ws, activation="silu", out_position=True)
            else:
                outs[key] = torch.full((slots, w.n), nan, dtype=torch.bfloat16, device=dev)
                fns[key] = lambda o=outs[key], c=c: run_gemm(a2_ro, w2, route, block_m=bm, top_k=1, topk_weights=tw,
                                                             out=o, config=c, workspace=ws, block_rows=True,
                                                             num_slots=slots)
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    same, nans = {}, {}
    for gname in {k.split("_")[0] for k in fns}:
        p, q = outs[f"{gname}_plan"], outs[f"{gname}_group"]
        if gname == "gu":
            p, q = p[real], q[real]
        same[gname] = bool(torch.equal(p, q))
        nans[gname] = bool(p.isnan().any() or q.isnan().any())
    runs = []
    for rep in range(3):
        order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
        tm = interleaved({t: fns[t] for t in order}, rounds=int(os.environ.get("ROUNDS", "7")))
        runs.append({t: tm[t].median_us() for t in fns})
    res.append({"name": name, "block_m": bm, "capacity": cap, "configs": cfgs, "same": same, "nan": nans, "us": runs})
    for gname in sorted({k.split("_")[0] for k in fns}):
        print(f"{name:9s} {gname} bm {bm:3d} same {same[gname]} nan {nans[gname]} | plan "
              + " ".join(f"{x[gname + '_plan']:7.1f}" for x in runs) + " | per-K-group "
              + " ".join(f"{x[gname + '_group'] / x[gname + '_plan'] - 1:+.1%}" for x in runs), flush=True)
    json.dump(res, open(f"{OUT}/group_commits_ab.json", "w"), indent=1)
