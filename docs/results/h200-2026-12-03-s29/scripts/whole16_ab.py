# ruff: noqa
"""Session 29: whole K stages (whole_stages: no K bound in the loop, new) against the bound checked (old), the
planner's configuration of each GEMM (gate_up unfused, as the GEMM harness runs it; down with top-k
weights), interleaved in one process, three timings, bit for bit. argv[1]: precompile [threads] | time."""
import dataclasses, json, math, os, sys

from chord_kernels.indexed import wgmma as W, planner as P
from chord_kernels.indexed.heuristics import choose_block_m

# (name, experts, N, K, slots, top_k); gate_up with SiLU fused, down with top-k weights
CASES = [(f"ep8_tok{t}_{g}", 48, 4096 if g == "gu" else 7168, 7168 if g == "gu" else 2048, 48 * t, 1)
         for t in (6, 8) for g in ("gu", "dn")]
CASES += [("tp8_160_gu", 384, 512, 7168, 8 * 400, 8)]


class _W:  # what choose_block_m reads
    def __init__(s, e):
        s.num_experts, s.profile = e, ("h200_tp8" if e == 384 else "h200_ep8")


def config(case):
    name, e, n, k, slots, top_k = case
    bm = choose_block_m(_W(e), slots)
    return bm, P._rows_config(n, k, bm, slots / e)


def variants(cfg):
    if not isinstance(cfg, W.WgmmaConfig) or not cfg.whole_stages:
        return {}
    return {"old": dataclasses.replace(cfg, whole_stages=False), "new": dataclasses.replace(cfg, whole_stages=True)}


def fused(case, cfg):
    return dataclasses.replace(cfg, silu_mul=True) if case[0].endswith("gu") and cfg.fits_silu_mul(case[2]) else cfg


if sys.argv[1] == "precompile":
    from concurrent.futures import ThreadPoolExecutor
    ks = {fused(case, c).kernel().source: fused(case, c).kernel() for case in CASES for c in variants(config(case)[1]).values()}
    with ThreadPoolExecutor(int(sys.argv[2]) if len(sys.argv) > 2 else 2) as ex:
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
        print(name, "no split_tail configuration", cfg, flush=True)
        continue
    g = torch.Generator(device=dev).manual_seed(slots + n)
    w = chord_kernels.pack("indexed", *random_quantized(e, n, k, generator=g, device=dev),
                           profile="h200_tp8" if e == 384 else "h200_ep8")
    tokens = slots // top_k
    a = (torch.randn(tokens, k, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    ids = torch.rand(tokens, e, generator=g, device=dev).argsort(dim=1)[:, :top_k].to(torch.int32).contiguous()
    tw = torch.rand(tokens, top_k, generator=g, device=dev) if name.endswith("dn") else None
    r = align_block_size(ids, bm, e)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    counts = torch.bincount(ids.reshape(-1).long(), minlength=e)
    blocks = int(sum(math.ceil(c / bm) for c in counts.tolist()))
    items = int(sum(math.ceil(math.ceil(c / bm) / cfg.items) for c in counts.tolist())) * cfg.ntiles(n)
    rem = items % sms
    split = 0 < 2 * rem <= sms
    fns, outs = {}, {}
    for tag, c in vs.items():
        gu = name.endswith("gu")
        outs[tag] = torch.full((slots, n // 2 if gu else n), float("nan"), dtype=torch.bfloat16, device=dev)

        def fn(out=outs[tag], c=c, gu=gu):
            run_gemm(a, w, route, block_m=bm, top_k=top_k, out=out, config=c, topk_weights=tw, zero_nonlocal=False,
                     activation="silu" if gu else None)
        fns[tag] = fn
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    same = torch.equal(outs["old"], outs["new"])
    nan = bool(outs["new"].isnan().any())
    runs = []
    for rep in range(3):
        order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
        tm = interleaved({t: fns[t] for t in order}, rounds=ROUNDS)
        runs.append({t: tm[t].median_us() for t in fns})
    res.append({"name": name, "block_m": bm, "items": items, "waves": items / sms, "split": split, "us": runs,
                "config": vs["new"].template_args(), "same": same, "nan": nan})
    print(f"{name:14s} bm={bm:3d} items={items:5d} waves={items / sms:6.2f} old "
          + " ".join(f"{x['old']:7.1f}" for x in runs) + " | new "
          + " ".join(f"{x['new'] / x['old'] - 1:+.1%}" for x in runs)
          + ("" if same and not nan else " DIFF/NAN"), flush=True)
    json.dump(res, open(f"{OUT}/whole16_ab.json", "w"), indent=1)
