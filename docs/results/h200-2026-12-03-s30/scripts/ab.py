# ruff: noqa
"""Session 30's A/B harness (session 29's, with the study `sub`: the one-fma subnormal dequantization): one GEMM at a time, two variants of its configuration interleaved in one
process, three timings, bit for bit (gate_up with SiLU fused, down with top-k weights; the split
study ran gate_up unfused). argv: STUDY precompile [threads] | STUDY time. Studies (each ran as its
own copy of this file, differing only in its cases and variants):
  split    halves of the last wave (needs ../split_tail.patch): whole items (old) / split_tail (new)
  whole_b  whole K stages on every kind of planned loop (call b)
  whole    whole K stages on the per-group loops (call c)
  whole16  whole K stages at 16-token blocks (call i)
  runs     whole K stages on TP8's down in runs of N tiles (call f)
  step     a branch before K step 1 of the per-step loops (needs ../step_branch.patch)
  four     gate_up at 32-48-token blocks: four warpgroups (planned, old) / two with whole stages (new)
  decode   whole K stages on the decode kernel's configurations (needs ../decode_whole.patch; call l)
Session 30 (scripts/ab.py here):
  sub      the one-fma dequantization against the two-instruction form, WGMMA configurations (calls a)
  subdec   the same on the decode kernel's configurations and a few WGMMA ones (call b)
  imad     right shifts as IMAD.HI in the one-fma form (needs ../imad_shift.patch; call e)
  four2    four consumer warpgroups against two, both in the one-fma form (call f)"""
import dataclasses, json, math, os, sys

from chord_kernels.indexed import wgmma as W, planner as P
from chord_kernels.indexed.decode import DecodeConfig
from chord_kernels.indexed.heuristics import choose_block_m


def ep8(ts, gs=("gu", "dn")):
    return [(f"ep8_tok{t}_{g}", 48, 4096 if g == "gu" else 7168, 7168 if g == "gu" else 2048, 48 * t, 1)
            for t in ts for g in gs]


def tp8(ms, g="gu"):
    return [(f"tp8_{m}_{g}", 384, 512 if g == "gu" else 7168, 7168 if g == "gu" else 256, 8 * m, 8) for m in ms]


def whole(cfg):
    return {"old": dataclasses.replace(cfg, whole_stages=False), "new": dataclasses.replace(cfg, whole_stages=True)}


def two_warpgroups(cfg):
    two = W.WgmmaConfig(block_m=cfg.block_m, mt=2, bk=256, stages=min(W.max_stages(cfg.block_m, 2, 256), 8), items=1,
                        dynamic=True, whole_stages=True)
    return {"old": cfg, "new": two}


# (cases, which configurations, their variants)
STUDIES = {
    "sub": (ep8((8, 12, 16, 24, 32, 43, 64, 128, 341)) + tp8((512, 1024, 2048, 8192)) + tp8((1024, 2048, 8192), "dn"),
            lambda c: isinstance(c, W.WgmmaConfig),
            lambda c: {"old": c, "new": dataclasses.replace(c, subnormal=True)}),
    # with the one-fma form: four consumer warpgroups of two tiles against the planned two (downs at 24-56
    # tokens, gate_up at 56), and two with whole stages against the planned four (gate_up at 24-48)
    "four2": (ep8((12, 16, 24, 32, 43), ("dn",)) + ep8((43,), ("gu",)) + tp8((2048,)) + ep8((16, 24, 32), ("gu",))
              + tp8((1024,)), lambda c: isinstance(c, W.WgmmaConfig) and c.items == 1 or c.consumers == 4,
              lambda c: {"old": dataclasses.replace(c, subnormal=True),
                         "new": dataclasses.replace(two_warpgroups(c)["new"] if c.consumers == 4 else W.WgmmaConfig(
                             block_m=c.block_m, mt=2, bk=256, stages=2, consumers=4, items=1, dynamic=True,
                             consumer_regs=104), subnormal=True)}),
    # the one-fma form with some right shifts as IMAD.HI (FMA pipe) instead of SHF (ALU)
    "imad": (ep8((2, 3, 8, 12, 16, 24, 32, 43, 64)) + tp8((160, 512, 1024)) + tp8((512,), "dn") + ep8((341,), ("dn",)),
             lambda c: True,
             lambda c: {"old": dataclasses.replace(c, subnormal=True),
                        **{t: dataclasses.replace(c, subnormal=True, imad_shifts=m)
                           for t, m in (("i8", 256), ("i12", 4096), ("i4_8", 272))}}),
    # the decode kernel's configurations (and a few WGMMA ones again, on the final code)
    "subdec": (ep8((1, 2, 3)) + tp8((160, 320)) + tp8((160, 512, 1024), "dn") + ep8((16, 43)) + tp8((1024,)),
               lambda c: True, lambda c: {"old": c, "new": dataclasses.replace(c, subnormal=True)}),
    "split": (ep8((12, 16, 20, 32, 43, 64), ("dn",)) + ep8((43, 341), ("gu",)) + ep8((341,), ("dn",)) + tp8((8192, 1536)),
              lambda c: c.can_split_tail,
              lambda c: {"old": dataclasses.replace(c, split_tail=False), "new": dataclasses.replace(c, split_tail=True)}),
    "whole_b": (ep8((12, 16, 43, 64, 128, 341)) + tp8((1024, 8192)), lambda c: not c.n_run, whole),
    "whole": (ep8((12, 16, 20, 28, 32, 43), ("dn",)) + ep8((43,), ("gu",)) + tp8((2048,)) + ep8((40,), ("gu",)),
              lambda c: c.whole_stages, whole),
    "whole16": (ep8((6, 8)) + tp8((400,)), lambda c: c.whole_stages, whole),
    "runs": (tp8((1280, 1536, 1792, 2048), "dn"), lambda c: c.n_run and not c.commit_per_step, whole),
    "step": (ep8((12, 16, 20, 32), ("gu",)) + ep8((64, 128, 341)) + tp8((1024, 8192)), lambda c: c.commit_per_step,
             lambda c: {"old": c, "new": dataclasses.replace(c, step_branch=True)}),
    "four": (ep8((17, 20, 24, 28, 32, 36), ("gu",)) + tp8((1024, 1280, 1536)), lambda c: c.consumers == 4, two_warpgroups),
    "decode": (ep8((1, 2, 3)) + tp8((160,)) + tp8((160, 512, 1024), "dn"), lambda c: isinstance(c, DecodeConfig), whole),
}
STUDY = sys.argv[1]
CASES, WANTED, VARIANTS = STUDIES[STUDY]
FUSED = STUDY != "split"


class _W:  # what choose_block_m reads
    def __init__(s, e):
        s.num_experts, s.profile = e, ("h200_tp8" if e == 384 else "h200_ep8")


def config(case):
    name, e, n, k, slots, top_k = case
    bm = choose_block_m(_W(e), slots)
    if STUDY in ("decode", "subdec", "imad"):  # the planner's choice, the decode kernel's among them (capacity as vLLM sizes it)
        return bm, (P.config_for_rows(n, k, bm, "sm_90a", slots / e)
                    or P._choose(n, k, bm, math.ceil(slots / bm) + e, 132, "sm_90a"))
    return bm, P._rows_config(n, k, bm, slots / e)


def variants(cfg):
    return VARIANTS(cfg) if isinstance(cfg, (W.WgmmaConfig, DecodeConfig)) and WANTED(cfg) else {}


def fused(case, cfg):
    gu = FUSED and case[0].endswith("gu") and isinstance(cfg, W.WgmmaConfig) and cfg.fits_silu_mul(case[2])
    return dataclasses.replace(cfg, silu_mul=True) if gu else cfg


if sys.argv[2] == "precompile":
    from concurrent.futures import ThreadPoolExecutor
    ks = {fused(case, c).kernel().source: fused(case, c).kernel() for case in CASES for c in variants(config(case)[1]).values()}
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
    vs = variants(cfg)
    if not vs:
        print(name, "not a configuration of this study", cfg, flush=True)
        continue
    g = torch.Generator(device=dev).manual_seed(slots + n)
    w = chord_kernels.pack("indexed", *random_quantized(e, n, k, generator=g, device=dev),
                           profile="h200_tp8" if e == 384 else "h200_ep8")
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

        wt = w if getattr(c, "subnormal", False) else dataclasses.replace(w, small_scales=False)

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
