# ruff: noqa
"""Session 69: the weights' L2 policy (l2_exp.patch: CHORD_EXP_WPOL 0 evict_first, the plan; 1 evict_normal; 2
evict_last) and streaming output stores (CHORD_EXP_STCS) on the GEMMs as the layer runs them: the down from rows in
routing order (tensor copies) by slot, and gate_up with SiLU-and-mul into routing order. Outputs NaN-poisoned, the
real rows compared bit for bit. Interleaved CUDA graphs, three timings.
argv: precompile [threads] | time [shape,...]"""
import dataclasses, functools, json, os, sys, types

import torch
from chord_kernels import indexed
from chord_kernels.indexed import api
from chord_kernels.indexed.wgmma import ARCH, ENTRY, WgmmaConfig
from chord_kernels.jit.kernel import CudaKernel


@dataclasses.dataclass(frozen=True)
class Exp(WgmmaConfig):
    wpol: int = 0
    stcs: bool = False

    def kernel(self):
        return _exp_kernel(self)


@functools.cache
def _exp_kernel(cfg):
    flags = (f"-DCHORD_EXP_WPOL={cfg.wpol}", *(("-DCHORD_EXP_STCS",) if cfg.stcs else ()))
    return CudaKernel(name="indexed_wgmma", source=cfg.source(), entry=ENTRY, arch=ARCH, flags=flags)


SMS, TOP_K, H = 132, 8, 7168
# name: (local experts, global experts, I, tokens, profile, gemm)
SHAPES = {**{f"tp{t}_down": (384, 384, 256, t, "h200_tp8", "down") for t in (8192, 4096, 12288)},
          "tp8192_gate_up": (384, 384, 256, 8192, "h200_tp8", "gate_up"),
          "ep341_down": (48, 384, 2048, 341 * 48, "h200_ep8", "down"),
          "ep128_down": (48, 384, 2048, 128 * 48, "h200_ep8", "down")}
VARIANTS = {"plan": {}, "wnormal": {"wpol": 1}, "wlast": {"wpol": 2}, "stcs": {"stcs": True},
            "wnormal_stcs": {"wpol": 1, "stcs": True}}


def facts(name):
    e, eg, inter, tokens, profile, which = SHAPES[name]
    w13 = types.SimpleNamespace(n=2 * inter, k=H, num_experts=e, profile=profile, small_scales=True)
    w2 = types.SimpleNamespace(n=H, k=inter, num_experts=e, profile=profile, small_scales=True)
    slots = tokens * TOP_K * e // eg
    return e, eg, inter, tokens, profile, which, w13, w2, slots, indexed.layer_block_m(w13, w2, slots), tokens * TOP_K / eg


def variants(w, bm, cap, tok_e, which):
    kw = {"activation": "silu"} if which == "gate_up" else {"block_rows": True}
    plan = api.launch_plan(w, bm, cap, SMS, ARCH, tok_e=tok_e, **kw).config
    fields = {f.name: getattr(plan, f.name) for f in dataclasses.fields(WgmmaConfig)}
    vs = {t: Exp(**fields, **v) for t, v in VARIANTS.items()}
    if which == "gate_up":
        vs = {t: c for t, c in vs.items() if not c.stcs}
    return vs


if sys.argv[1] == "precompile":
    from concurrent.futures import ThreadPoolExecutor
    ks = {}
    for name in SHAPES:
        e, eg, inter, tokens, profile, which, w13, w2, slots, bm, tok_e = facts(name)
        w = w13 if which == "gate_up" else w2
        for cap in range(slots // bm, slots // bm + e + 2):
            for c in variants(w, bm, cap, tok_e, which).values():
                kk = c.kernel()
                ks[(kk.source, kk.flags)] = kk
    with ThreadPoolExecutor(int(sys.argv[2]) if len(sys.argv) > 2 else 2) as ex:
        list(ex.map(lambda kk: kk.compile(ARCH), ks.values()))
    print(len(ks), "kernels")
    sys.exit(0)

import chord_kernels
from chord_kernels.formats import random_quantized
from chord_kernels.routing import align_block_size
from chord_bench.timing import interleaved

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
res = []
for name in (sys.argv[2].split(",") if len(sys.argv) > 2 else SHAPES):
    e, eg, inter, tokens, profile, which, _, _, slots, bm, tok_e = facts(name)
    g = torch.Generator(device=dev).manual_seed(69)
    n, k = (2 * inter, H) if which == "gate_up" else (H, inter)
    w = chord_kernels.pack("indexed", *random_quantized(e, n, k, generator=g, device=dev), profile=profile)
    ids = torch.rand(tokens, eg, generator=g, device=dev).topk(TOP_K, dim=1).indices.to(torch.int32).contiguous()
    emap = None
    if e < eg:
        emap = torch.full((eg,), -1, dtype=torch.int32, device=dev)
        emap[:e] = torch.arange(e, dtype=torch.int32, device=dev)
    r = align_block_size(ids, bm, eg, emap)
    cap = indexed.routing_capacity(r.sorted_token_ids, r.expert_ids, bm)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    entries = r.sorted_token_ids.long()[:cap * bm]
    real_pos = (entries < tokens * TOP_K) & (r.expert_ids[:cap].repeat_interleave(bm) >= 0)
    ws = indexed.new_workspace(indexed.max_workspace_bytes(w, device=dev) * 4, dev)
    vs = variants(w, bm, cap, tok_e, which)
    fns, outs = {}, {}
    if which == "gate_up":
        a = (torch.randn(tokens, H, generator=g, device=dev) * 0.5).to(torch.bfloat16)
        for t, c in vs.items():
            outs[t] = torch.full((cap * bm, inter), float("nan"), dtype=torch.bfloat16, device=dev)
            fns[t] = lambda o=outs[t], c=c: api.run_gemm(a, w, route, block_m=bm, top_k=TOP_K, out=o, config=c, workspace=ws,
                                                         activation="silu", out_position=True, zero_nonlocal=False)
        real = real_pos
    else:
        a = (torch.randn(cap * bm, inter, generator=g, device=dev) * 0.5).to(torch.bfloat16)
        tw = torch.rand(tokens * TOP_K, generator=g, device=dev)
        for t, c in vs.items():
            outs[t] = torch.full((tokens * TOP_K, H), float("nan"), dtype=torch.bfloat16, device=dev)
            fns[t] = lambda o=outs[t], c=c: api.run_gemm(a, w, route, block_m=bm, top_k=1, topk_weights=tw, out=o, config=c,
                                                         workspace=ws, block_rows=True, num_slots=tokens * TOP_K,
                                                         zero_nonlocal=False)
        real = torch.zeros(tokens * TOP_K, dtype=torch.bool, device=dev)
        real[entries[real_pos]] = True
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    finite = bool(torch.isfinite(outs["plan"][real]).all())
    same = {t: torch.equal(outs[t][real], outs["plan"][real]) for t in fns}
    runs = []
    for rep in range(3):
        order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
        tm = interleaved({t: fns[t] for t in order}, rounds=int(os.environ.get("ROUNDS", "7")))
        runs.append({t: tm[t].median_us() for t in fns})
    res.append({"shape": name, "block_m": bm, "tok_e": tok_e, "finite": finite, "same": same, "us": runs,
                "config": str(vs["plan"])})
    print(f"{name:15s} bm {bm:3d} plan " + " ".join(f"{x['plan']:7.1f}" for x in runs)
          + "".join(f" | {t} " + " ".join(f"{x[t] / x['plan'] - 1:+.1%}" for x in runs) for t in fns if t != "plan")
          + ("" if finite and all(same.values()) else f" FINITE={finite} SAME={same}"), flush=True)
    json.dump(res, open(f"{OUT}/l2_ab.json", "w"), indent=1)
    del w, a, ws, outs, fns
    torch.cuda.empty_cache()
