# ruff: noqa
"""Session 38's A/B harness (session 37's, ../h200-2026-12-03-s37/scripts/ab.py, with this session's
studies in place of its own): one GEMM at a time, variants of its configuration interleaved in one process, three
timings, bit for bit (gate_up with SiLU fused, down with top-k weights).
argv: STUDY precompile [threads] | STUDY time. Studies:
  dec    TP8's 24- and 32-token downs (K = 256) on the WGMMA kernel's runs of N tiles (wg; at 32 with
         row widths at 24 as the runs now plan them, wg0 without) against the decode kernel's wide tiles
  runs   row widths on TP8's down (K = 256) in runs of N tiles at 40-56-token blocks (ping-pong
         consumers): 8 tokens less (rw1), 8 and 16 less (rw2), 208 consumer registers from 48 tokens
         (at 216 the producer spills 24-32 bytes)"""
import dataclasses, json, math, os, sys

from chord_kernels.indexed import wgmma as W, planner as P
from chord_kernels.indexed.decode import DecodeConfig
from chord_kernels.indexed.heuristics import choose_block_m


def tp8(ms, g="gu"):
    return [(f"tp8_{m}_{g}", 384, 512 if g == "gu" else 7168, 7168 if g == "gu" else 256, 8 * m, 8) for m in ms]




def runs_variants(case, bm, c):
    if not isinstance(c, W.WgmmaConfig) or not c.n_run or not 40 <= bm <= 56:
        return {}
    c = dataclasses.replace(c, subnormal=True)
    regs = 216 if bm <= 40 else 208
    out = {"old": c, "rw1": dataclasses.replace(c, row_widths=(bm - 8,), consumer_regs=regs)}
    if bm >= 48:
        out["rw2"] = dataclasses.replace(c, row_widths=(bm - 16, bm - 8), consumer_regs=regs)
        out["r208"] = dataclasses.replace(c, consumer_regs=regs)
    return out


def dec_variants(case, bm, c):
    if not isinstance(c, DecodeConfig) or bm not in (24, 32):
        return {}
    wg = dataclasses.replace(W.choose_wgmma_config(case[2], case[3], bm, case[4] / case[1]), subnormal=True)
    out = {"old": dataclasses.replace(c, subnormal=True), "wg": wg}
    if wg.row_widths:
        out["wg0"] = dataclasses.replace(wg, row_widths=())
    return out


STUDIES = {
    # TP8's 24- and 32-token downs: decode kernel against WGMMA runs
    "dec": (tp8((512, 640, 768, 896, 1024, 1152), "dn"), lambda c: True, dec_variants),
    # TP8's down in runs of N tiles at 40-56-token blocks
    "runs": (tp8((1280, 1344, 1536, 1664, 1920, 2048, 2304), "dn"), lambda c: True, runs_variants),
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
