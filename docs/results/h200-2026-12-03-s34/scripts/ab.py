# ruff: noqa
"""Session 34's A/B harness (session 33's, ../h200-2026-12-03-s33/scripts/ab.py, with this session's
studies): one GEMM at a time, two variants of its configuration interleaved in one process, three
timings, bit for bit (gate_up with SiLU fused, down with top-k weights). argv: STUDY precompile
[threads] | STUDY time. Studies:
  tp8dn  TP8's down (K = 256) at 24- and 32-token blocks: planned decode tiles against other decode tiles
         and the WGMMA kernel's runs of N tiles
  sched  the WGMMA items from the global counter against the strided order (flipped from the plan)"""
import dataclasses, json, math, os, sys

from chord_kernels.indexed import wgmma as W, planner as P
from chord_kernels.indexed.decode import DecodeConfig
from chord_kernels.indexed.heuristics import choose_block_m


def ep8(ts, gs=("gu", "dn")):
    return [(f"ep8_tok{t}_{g}", 48, 4096 if g == "gu" else 7168, 7168 if g == "gu" else 2048, 48 * t, 1)
            for t in ts for g in gs]


def tp8(ms, g="gu"):
    return [(f"tp8_{m}_{g}", 384, 512 if g == "gu" else 7168, 7168 if g == "gu" else 256, 8 * m, 8) for m in ms]



def tp8dn_variants(case, bm, c):
    """TP8's down (K = 256) at 24- and 32-token blocks: the planned decode-kernel tiles against other
    decode tiles (the one-fma form moved the balance) and the WGMMA kernel's runs of N tiles."""
    from chord_kernels.indexed.decode import DecodeConfig as D
    out = {"old": dataclasses.replace(c, subnormal=True)}
    stages = W.max_stages(bm, 2, 256, n_run=W.RUN_TILES)
    out["wruns"] = W.WgmmaConfig(block_m=bm, mt=2, bk=256, stages=min(stages, 8), n_run=W.RUN_TILES, pingpong=True,
                                 whole_stages=True, subnormal=True)
    if bm == 32:
        out["d4x4s3"] = D(block_m=32, warps=4, mt=4, bk=256, stages=3, ctas_per_sm=1, schedule="strided", subnormal=True)
        out["d8x2s3"] = D(block_m=32, warps=8, mt=2, bk=256, stages=3, ctas_per_sm=1, schedule="strided", subnormal=True)
        out["d16x2"] = D(block_m=32, warps=16, mt=2, bk=256, stages=2, ctas_per_sm=1, schedule="strided", subnormal=True)
    else:
        out["d8x4"] = D(block_m=bm, warps=8, mt=4, bk=256, stages=2, ctas_per_sm=1, schedule="strided", subnormal=True)
    return out


STUDIES = {
    # TP8's down at 512-1024 tokens: decode tiles and WGMMA runs again, now that both dequantize with one fma
    "tp8dn": (tp8((512, 768, 1024), "dn"), lambda c: True, tp8dn_variants),
    # the WGMMA items from the global counter against the strided order (and the other way round)
    "sched": (ep8((16, 32, 43)) + tp8((1024,)), lambda c: isinstance(c, W.WgmmaConfig),
              lambda c: {"old": dataclasses.replace(c, subnormal=True),
                         "flip": dataclasses.replace(c, subnormal=True, dynamic=not c.dynamic)}),
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
    # the planner's choice, the decode kernel's among them (capacity as vLLM sizes it)
    return bm, (P.config_for_rows(n, k, bm, "sm_90a", slots / e)
                or P._choose(n, k, bm, math.ceil(slots / bm) + e, 132, "sm_90a"))


def variants(case, bm, cfg):
    if not (isinstance(cfg, (W.WgmmaConfig, DecodeConfig)) and WANTED(cfg)):
        return {}
    return VARIANTS(case, bm, cfg) if VARIANTS.__code__.co_argcount == 3 else VARIANTS(cfg)


def fused(case, cfg):
    gu = FUSED and case[0].endswith("gu") and isinstance(cfg, W.WgmmaConfig) and cfg.fits_silu_mul(case[2])
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
