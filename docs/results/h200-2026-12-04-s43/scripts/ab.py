# ruff: noqa
"""Session 43's A/B harness (session 42's ab.py with this session's study): one GEMM at a time, variants
of its configuration interleaved in one process, three timings; bit for bit where the variants sum in
the same order, else the largest difference against the plan's output.
argv: STUDY precompile [threads] | STUDY time. Studies:
  mt3    the down's one-block items of 40-56 tokens on two consumer warpgroups of three tiles (384-channel
         N tiles: 19 at N = 7168, 6.9 waves at 48 experts where 256-channel tiles make 10.2), two stages:
         per-step commits with the plan's row widths (m3s) or none (m3s0), per-group commits without
         row widths (m3g) or with the plan's (m3gw), against the plan (two tiles per warpgroup)"""
import dataclasses, json, math, os, sys

from chord_kernels.indexed import wgmma as W, planner as P
from chord_kernels.indexed.decode import DecodeConfig
from chord_kernels.indexed.heuristics import choose_block_m, short_k_config

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from variants import GroupCommit


def ep8(rows, g="dn"):
    return [(f"ep8_{r}_{g}", 48, 4096 if g == "gu" else 7168, 7168 if g == "gu" else 2048, int(48 * r), 1) for r in rows]


def tp8(ms, g="dn"):
    return [(f"tp8_{m}_{g}", 384, 512 if g == "gu" else 7168, 7168 if g == "gu" else 256, 8 * m, 8) for m in ms]


EXACT = {"old"}


def mt3_variants(case, bm, c):
    """Two consumer warpgroups of three tiles (384-channel N tiles) against the planned two of two."""
    if not (isinstance(c, W.WgmmaConfig) and c.consumers == 2 and c.mt == 2 and c.items == 1 and not c.n_run):
        return {}
    out = {"old": c}
    st = W.max_stages(bm, 3, c.bk, consumers=2, items=1)
    if st < 2:
        return out
    base = dataclasses.replace(c, mt=3, stages=min(st, 8), whole_stages=False, shift_pairs=False)
    out["m3s"] = dataclasses.replace(base, row_widths=c.row_widths)
    out["m3s0"] = dataclasses.replace(base, row_widths=())
    g = dataclasses.replace(base, row_widths=(), whole_stages=case[3] % c.bk == 0)
    out["m3g"] = GroupCommit(**{f.name: getattr(g, f.name) for f in dataclasses.fields(g)})
    gw = dataclasses.replace(g, row_widths=c.row_widths)
    out["m3gw"] = GroupCommit(**{f.name: getattr(gw, f.name) for f in dataclasses.fields(gw)})
    return out


STUDIES = {
    "mt3": (ep8((43, 48, 32, 36, 24, 28)), lambda c: True, mt3_variants),
}
STUDY = sys.argv[1]
CASES, WANTED, VARIANTS = STUDIES[STUDY]
FUSED = True


class _W:  # what choose_block_m reads
    def __init__(s, e):
        s.num_experts, s.profile = e, ("h200_tp8" if e == 384 else "h200_ep8")


def config(case):
    name, e, n, k, slots, top_k = case
    bm = choose_block_m(_W(e), slots)
    return bm, (P.config_for_rows(n, k, bm, "sm_90a", slots / e)
                or P._choose(n, k, bm, math.ceil(slots / bm) + e, 132, "sm_90a"))


def variants(case, bm, cfg):
    if not (isinstance(cfg, (W.WgmmaConfig, DecodeConfig)) and WANTED(cfg)):
        return {}
    return {t: c if c.subnormal else dataclasses.replace(c, subnormal=True) for t, c in VARIANTS(case, bm, cfg).items()}


def fused(case, cfg):
    gu = FUSED and case[0].endswith("gu") and cfg.fits_silu_mul(case[2])
    return dataclasses.replace(cfg, silu_mul=True) if gu else cfg


if sys.argv[2] == "precompile":
    from concurrent.futures import ThreadPoolExecutor
    ks = {fused(case, c).kernel().source: fused(case, c).kernel() for case in CASES for c in variants(case, *config(case)).values()}
    with ThreadPoolExecutor(int(sys.argv[3]) if len(sys.argv) > 3 else 2) as ex:
        list(ex.map(lambda k: k.compile("sm_90a"), ks.values()))
    print(len(ks), "kernels")
    sys.exit(0)

import torch
import chord_kernels
from chord_kernels.indexed.api import run_gemm
from chord_kernels.formats import random_quantized
from chord_kernels.routing import align_block_size
from chord_bench.timing import interleaved

dev = torch.device("cuda")
sms = torch.cuda.get_device_properties(dev).multi_processor_count
OUT = os.environ.get("OUT", "/tmp")
ROUNDS = int(os.environ.get("ROUNDS", "9"))
DRAWS = int(os.environ.get("DRAWS", "2"))
res = []
for case in CASES:
  for draw in range(DRAWS):
    name, e, n, k, slots, top_k = case
    bm, cfg = config(case)
    vs = {t: fused(case, c) for t, c in variants(case, bm, cfg).items()}
    if not vs:
        print(name, "not a configuration of this study", cfg, flush=True)
        break
    g = torch.Generator(device=dev).manual_seed(slots + n + 1000 * draw)
    w = chord_kernels.pack("indexed", *random_quantized(e, n, k, generator=g, device=dev),
                           profile="h200_tp8" if e == 384 else "h200_ep8",)
    tokens = slots // top_k
    a = (torch.randn(tokens, k, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    ids = torch.rand(tokens, e, generator=g, device=dev).argsort(dim=1)[:, :top_k].to(torch.int32).contiguous()
    gu = name.endswith("gu")
    tw = None if gu else torch.rand(tokens, top_k, generator=g, device=dev)
    r = align_block_size(ids, bm, e)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    counts = torch.bincount(ids.reshape(-1).long(), minlength=e)
    items = int(sum(math.ceil(math.ceil(c / bm) / getattr(cfg, "items", 1)) for c in counts.tolist())) * cfg.ntiles(n)
    silu = FUSED and gu
    fns, outs = {}, {}
    for tag, c in vs.items():
        outs[tag] = torch.full((slots, n // 2 if silu else n), float("nan"), dtype=torch.bfloat16, device=dev)

        def fn(out=outs[tag], c=c):
            run_gemm(a, w, route, block_m=bm, top_k=top_k, out=out, config=c, topk_weights=tw, zero_nonlocal=False,
                     activation="silu" if silu else None)
        fns[tag] = fn
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    same = all(torch.equal(outs["old"], o) for t, o in outs.items() if t in EXACT)
    nan = any(bool(o.isnan().any()) for o in outs.values())
    ref = outs["old"].float()
    diff = {t: float((o.float() - ref).abs().max() / ref.abs().max()) for t, o in outs.items() if t not in EXACT}
    runs = []
    for rep in range(3):
        order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
        tm = interleaved({t: fns[t] for t in order}, rounds=ROUNDS)
        runs.append({t: tm[t].median_us() for t in fns})
    res.append({"name": name, "draw": draw, "block_m": bm, "items": items, "waves": items / sms, "us": runs,
                "configs": {t: repr(c) for t, c in vs.items()}, "same": same, "nan": nan, "diff": diff,
                "rows_max": int(counts.max())})
    print(f"{name:12s} d{draw} bm={bm:3d} items={items:5d} waves={items / sms:6.2f} old "
          + " ".join(f"{x['old']:7.1f}" for x in runs)
          + "".join(f" | {t} " + " ".join(f"{x[t] / x['old'] - 1:+.1%}" for x in runs) for t in fns if t != "old")
          + ("" if same and not nan else " DIFF/NAN") + (f" diff {max(diff.values()):.1e}" if diff else ""), flush=True)
    json.dump(res, open(f"{OUT}/{STUDY}_ab.json", "w"), indent=1)
