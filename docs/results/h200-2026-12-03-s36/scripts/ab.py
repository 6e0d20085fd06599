# ruff: noqa
"""Session 36's A/B harness (session 35's, ../h200-2026-12-03-s35/scripts/ab.py, with this session's
studies): one GEMM at a time, variants of its configuration interleaved in one process, three
timings, bit for bit (gate_up with SiLU fused unless the study is plain, down with top-k weights).
argv: STUDY precompile [threads] | STUDY time. Studies:
  so     TP8's down at 24- and 32-token blocks: the epilogue staged in the stage (stage_out), two CTAs of
         256 channels at 32 tokens, against the plan (512 channels, one CTA)
  gu16p  plain gate_up (no SiLU) at 16-token blocks, 6-9 rows per expert: the decode kernel's wide tiles
         with row widths against the planned WGMMA items
  dyn    TP8's down at 16-32-token blocks on the decode kernel's short-K tiles: the dynamic schedule
         (a global item counter) against the planned strided one
  dyn16  the same for EP8's 16-token blocks on those tiles (the down, K = 2048; gate_up with SiLU fused)
  gusilu gate_up's 16-token blocks with SiLU-and-mul fused: WGMMA against the decode kernel (session 35's last)
  gu16   gate_up's 16-token blocks on the decode kernel against the WGMMA kernel
  rw2    the plan with row widths (session 35) against the WGMMA kernel and decode tiles without them
  rw     16-32-token blocks on the decode kernel with row widths against the plan
  halfk  the decode kernel's short-K GEMMs on half K tiles (128-K stages) against the planned whole tiles"""
import dataclasses, json, math, os, sys

from chord_kernels.indexed import wgmma as W, planner as P
from chord_kernels.indexed.decode import DecodeConfig
from chord_kernels.indexed.heuristics import choose_block_m


def ep8(ts, gs=("gu", "dn")):
    return [(f"ep8_tok{t}_{g}", 48, 4096 if g == "gu" else 7168, 7168 if g == "gu" else 2048, round(48 * t), 1)
            for t in ts for g in gs]


def tp8(ms, g="gu"):
    return [(f"tp8_{m}_{g}", 384, 512 if g == "gu" else 7168, 7168 if g == "gu" else 256, 8 * m, 8) for m in ms]



def halfk_variants(case, bm, c):
    """The decode kernel's short-K GEMMs (TP8's down, K = 256, and the 8-token decode blocks) on half
    K tiles (128-K stages, twice as many in the same shared memory) against the planned whole tiles."""
    from chord_kernels.indexed.decode import DecodeConfig as D
    from chord_kernels.indexed.heuristics import LIST_RESERVE
    c = dataclasses.replace(c, subnormal=True)
    out = {"old": c}

    def most(**kw):
        best = None
        for s in range(2, 7):
            d = D(**{**kw, "stages": s})
            if d.smem_bytes(0) + LIST_RESERVE <= d.per_cta_budget():
                best = d
        return best

    base = dict(block_m=bm, mt=c.mt, schedule=c.schedule, subnormal=True)
    for tag, kw in {"h": dict(warps=c.warps, ctas_per_sm=c.ctas_per_sm),
                    "h8w1c": dict(warps=8, ctas_per_sm=1), "h4w2c": dict(warps=4, ctas_per_sm=2)}.items():
        d = most(**base, **kw, bk=128)
        if d is not None and d not in out.values():
            out[f"{tag}s{d.stages}"] = d
            if d.stages > 3:
                out[f"{tag}s3"] = dataclasses.replace(d, stages=3)
    return out


def rw_variants(case, bm, c):
    """16-32-token blocks on the decode kernel with row widths (an item multiplies only the token
    tiles up to its last real row) against the plan (the WGMMA kernel's 16-token items, or the
    decode kernel's short-K tiles without row widths)."""
    from chord_kernels.indexed.decode import DecodeConfig as D
    from chord_kernels.indexed.heuristics import choose_config
    c = dataclasses.replace(c, subnormal=True)
    out = {"old": c}
    if isinstance(c, D):
        out["rw"] = dataclasses.replace(c, row_widths=True)
        return out
    sched = "balanced" if case[0].endswith("gu") else "strided"
    wide = D(block_m=bm, warps=4, mt=4, bk=256, stages=2, ctas_per_sm=2, schedule=sched, subnormal=True)
    out["d4x4"] = wide
    out["d4x4rw"] = dataclasses.replace(wide, row_widths=True)
    out["d4x2rw"] = dataclasses.replace(choose_config(case[2], case[3], bm), schedule=sched, subnormal=True,
                                        row_widths=True)
    return out


def rw2_variants(case, bm, c):
    """The plan (with row widths) against the WGMMA kernel and the decode kernel's tiles without row
    widths; for gate_up also the decode tiles in the balanced order."""
    from chord_kernels.indexed.heuristics import short_k_config
    name, e, n, k, slots, top_k = case
    out = {"old": dataclasses.replace(c, subnormal=True)}
    wg = k >= 2048 and (P.config_for_rows(n, k, bm, "sm_90a", slots / e) or W.choose_wgmma_config(n, k, bm, None))
    dec = short_k_config(n, bm)
    if dec is None and k > 2048:  # TP8's gate_up (N = 512): the same tiles, two N tiles
        dec = DecodeConfig(block_m=bm, warps=4, mt=4, bk=256, stages=2, ctas_per_sm=2, schedule="strided",
                           row_widths=True)
    for tag, v in (("wg", wg), ("dec", dec), ("dec_norw", dec and dataclasses.replace(dec, row_widths=False)),
                   ("decb", dec and k > 2048 and dataclasses.replace(dec, schedule="balanced"))):
        if v:
            v = dataclasses.replace(v, subnormal=True)
            if v not in out.values():
                out[tag] = v
    return out


def gusilu_variants(case, bm, c):
    """gate_up's 16-token blocks, SiLU-and-mul fused: the WGMMA kernel (planned) against the decode
    kernel's wide tiles with row widths (pairs of gate and up warps)."""
    from chord_kernels.indexed.heuristics import short_k_config
    return {"old": dataclasses.replace(c, subnormal=True),
            "dec": dataclasses.replace(short_k_config(case[2], bm), subnormal=True)}


def so_variants(case, bm, c):
    """TP8's down (K = 256) on the decode kernel's short-K tiles: the epilogue staged in the item's
    last stage (stage_out) on the planned tiles and, at 32 tokens, on two CTAs of 256 channels."""
    from chord_kernels.indexed.decode import DecodeConfig as D
    c = dataclasses.replace(c, subnormal=True)
    out = {"old": c, "so": dataclasses.replace(c, stage_out=True)}
    if bm == 32:
        two = D(block_m=32, warps=4, mt=4, bk=256, stages=2, ctas_per_sm=2, schedule="strided", subnormal=True,
                stage_out=True)
        out["so2"] = two
        out["so2d"] = dataclasses.replace(two, schedule="dynamic")
    return out


def gu16p_variants(case, bm, c):
    """Plain gate_up's 16-token blocks: the WGMMA kernel's items (planned above 6 rows per expert)
    against the decode kernel's wide tiles with row widths, strided and dynamic."""
    from chord_kernels.indexed.heuristics import short_k_config
    dec = dataclasses.replace(short_k_config(case[2], bm), subnormal=True)
    wg = dataclasses.replace(W.choose_wgmma_config(case[2], case[3], bm, None), subnormal=True)
    return {"old": wg, "dec": dec, "decd": dataclasses.replace(dec, schedule="dynamic")}


def dyn_variants(case, bm, c):
    """The decode kernel's short-K tiles in the dynamic order (a global item counter) against the plan."""
    c = dataclasses.replace(c, subnormal=True)
    return {"old": c, "dyn": dataclasses.replace(c, schedule="dynamic")}


STUDIES = {
    # EP8's 16-token blocks on the short-K tiles (down; gate_up fused up to 6 rows), dynamic against strided
    "dyn16": (ep8((3.6, 4, 5, 6, 8, 9), ("dn",)) + ep8((3.6, 4, 5, 6), ("gu",)), lambda c: isinstance(c, DecodeConfig),
              dyn_variants),
    # TP8's down on the short-K tiles, the dynamic schedule against the strided one
    "dyn": (tp8((256, 384, 512, 640, 768, 896, 1024, 1152), "dn"), lambda c: isinstance(c, DecodeConfig), dyn_variants),
    # TP8's down with the epilogue staged in the stage, two CTAs of 256 channels at 32 tokens
    "so": (tp8((512, 640, 768, 896, 1024, 1152), "dn"), lambda c: isinstance(c, DecodeConfig), so_variants),
    # plain gate_up's 16-token blocks on the decode kernel against the WGMMA kernel (6-9 rows per expert)
    "gu16p": (ep8((6, 7, 8, 9), ("gu",)), lambda c: True, gu16p_variants),
    # gate_up's 16-token blocks with SiLU-and-mul fused, WGMMA against the decode kernel's pairs of warps
    "gusilu": (ep8((3.6, 4, 5, 6, 8, 9), ("gu",)), lambda c: True, gusilu_variants),
    # gate_up's 16-token blocks on the decode kernel (strided, row widths) against the WGMMA kernel
    "gu16": (ep8((6, 7, 8, 9), ("gu",)) + tp8((256, 384), "gu"), lambda c: True, rw2_variants),
    # the plan with row widths against the WGMMA kernel and the decode tiles without them, 16-32-token blocks
    "rw2": (ep8((3.6, 4, 5, 7, 8, 9, 10, 12, 16, 20), ("dn",)) + ep8((3.6, 4, 5), ("gu",))
            + tp8((320, 448, 640, 896, 1152), "dn"), lambda c: True, rw2_variants),
    # 16-32-token blocks on the decode kernel with row widths (EP8 4-8 rows per expert, TP8 256-1024 tokens)
    "rw": (ep8((4, 5, 6, 8)) + tp8((256, 384), "gu") + tp8((256, 384, 512, 768, 1024), "dn"),
           lambda c: True, rw_variants),
    # the decode kernel's short-K GEMMs on 128-K stages (half K tiles; needs half_k.patch), TP8 16-32-token
    # blocks and decode
    "halfk": (tp8((256, 512, 768, 1024, 1152), "dn") + tp8((160,), "dn") + tp8((160,), "gu")
              + ep8((1, 3), ("gu", "dn")), lambda c: isinstance(c, DecodeConfig), halfk_variants),
}
STUDY = sys.argv[1]
CASES, WANTED, VARIANTS = STUDIES[STUDY]
FUSED = STUDY != "gu16p"


class _W:  # what choose_block_m reads
    def __init__(s, e):
        s.num_experts, s.profile = e, ("h200_tp8" if e == 384 else "h200_ep8")


def config(case):
    name, e, n, k, slots, top_k = case
    bm = choose_block_m(_W(e), slots)
    # the planner's choice, the decode kernel's among them (capacity as vLLM sizes it)
    return bm, (P.config_for_rows(n, k, bm, "sm_90a", slots / e)
                or P._choose(n, k, bm, math.ceil(slots / bm) + e, 132, "sm_90a"))


def variants(case, bm, cfg):
    if not (isinstance(cfg, (W.WgmmaConfig, DecodeConfig)) and WANTED(cfg)):
        return {}
    return VARIANTS(case, bm, cfg) if VARIANTS.__code__.co_argcount == 3 else VARIANTS(cfg)


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
res = []
for case in CASES:
    name, e, n, k, slots, top_k = case
    bm, cfg = config(case)
    vs = variants(case, bm, cfg)
    if not vs:
        print(name, "not a configuration of this study", cfg, flush=True)
        continue
    g = torch.Generator(device=dev).manual_seed(slots + n)
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

        wt = w

        def fn(out=outs[tag], c=c, wt=wt):
            run_gemm(a, wt, route, block_m=bm, top_k=top_k, out=out, config=c, topk_weights=tw, zero_nonlocal=False,
                     activation="silu" if silu else None)
        fns[tag] = fn
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    same = all(torch.equal(outs["old"], o) for o in outs.values())
    nan = any(bool(o.isnan().any()) for o in outs.values())
    runs = []
    for rep in range(3):
        order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
        tm = interleaved({t: fns[t] for t in order}, rounds=ROUNDS)
        runs.append({t: tm[t].median_us() for t in fns})
    res.append({"name": name, "block_m": bm, "items": items, "waves": items / sms, "us": runs,
                "configs": {t: c.template_args() for t, c in vs.items()}, "same": same, "nan": nan})
    print(f"{name:14s} bm={bm:3d} items={items:5d} waves={items / sms:6.2f} old "
          + " ".join(f"{x['old']:7.1f}" for x in runs)
          + "".join(f" | {t} " + " ".join(f"{x[t] / x['old'] - 1:+.1%}" for x in runs) for t in fns if t != "old")
          + ("" if same and not nan else " DIFF/NAN"), flush=True)
    json.dump(res, open(f"{OUT}/{STUDY}_ab.json", "w"), indent=1)
