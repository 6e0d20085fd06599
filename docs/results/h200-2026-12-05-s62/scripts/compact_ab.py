# ruff: noqa
"""Session 62: the launch's item compaction by lane scans (5ba2bbe, scheduler.cuh compact_items) against the loop
over the warps it replaced (the same headers with compact_scan.patch reversed: .dev/s62/inc_loop). Each GEMM as
the layer runs it (gate_up with SiLU fused; the down from routing-order rows by tensor copies with top-k weights),
interleaved, three timings (listed, reversed, listed), outputs NaN-poisoned and compared bit for bit.
argv: precompile [threads] | time"""
import dataclasses, functools, json, os, sys, types

from chord_kernels.indexed import wgmma as W
from chord_kernels.indexed.api import launch_plan
from chord_kernels.indexed.planner import cached_plan, config_for_rows
from chord_kernels.jit.kernel import CudaKernel

CASES = {"ep8_tok16": (48, 768, 1), "ep8_tok43": (48, 2064, 1), "ep8_tok341": (48, 16368, 1),
         "tp8_1024": (384, 1024, 8), "tp8_8192": (384, 8192, 8)}
SHAPES = {"ep8": ((4096, 7168), (7168, 2048)), "tp8": ((512, 7168), (7168, 256))}
ARCH, SMS, INC = "sm_90a", 132, ".dev/s62/inc_loop"


@dataclasses.dataclass(frozen=True)
class IncCfg(W.WgmmaConfig):
    inc: str = ""

    def kernel(self):
        return _kernel(self)


@functools.cache
def _kernel(cfg):
    base = W.WgmmaConfig(**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(W.WgmmaConfig)})
    return CudaKernel(name="indexed_wgmma", source=base.source(), entry=W.ENTRY, arch=W.ARCH, flags=("-I", cfg.inc))


def gemms(name):
    e, tokens, top_k = CASES[name]
    from chord_kernels import indexed
    (n1, k1), (n2, k2) = SHAPES[name[:3]]
    prof = "h200_ep8" if e == 48 else "h200_tp8"
    slots, tok_e = tokens * top_k, tokens * top_k / e
    w13 = types.SimpleNamespace(n=n1, k=k1, num_experts=e, profile=prof, small_scales=True)
    w2 = types.SimpleNamespace(n=n2, k=k2, num_experts=e, profile=prof, small_scales=True)
    bm = indexed.layer_block_m(w13, w2, slots)
    return e, tokens, top_k, bm, tok_e, ((w13, "silu", False), (w2, None, True))


def base(w, bm, cap, tok_e):
    return cached_plan(w.n, w.k, bm, cap, SMS, ARCH, config_for_rows(w.n, w.k, bm, ARCH, tok_e)).config


if sys.argv[1] == "precompile":
    from concurrent.futures import ThreadPoolExecutor
    ks = {}
    for name in CASES:
        e, tokens, top_k, bm, tok_e, ws = gemms(name)
        cap = -(-(tokens * top_k + e * (bm - 1)) // bm)  # align_block_size's capacity
        for w, act, rows in ws:
            for small in (True, False):
                w = dataclasses.replace(w) if False else types.SimpleNamespace(**{**vars(w), "small_scales": small})
                b = base(w, bm, cap, tok_e)
                if isinstance(b, W.WgmmaConfig):
                    for c in (b, IncCfg(**dataclasses.asdict(b), inc=INC)):
                        k = launch_plan(w, bm, cap, SMS, ARCH, config=c, tok_e=tok_e, activation=act, block_rows=rows).config.kernel()
                        ks[k.source + str(k.flags)] = k
    with ThreadPoolExecutor(int(sys.argv[2]) if len(sys.argv) > 2 else 2) as ex:
        list(ex.map(lambda k: k.compile(ARCH), ks.values()))
    print(len(ks), "kernels")
    sys.exit(0)

import torch
import chord_kernels
from chord_kernels.formats import random_quantized
from chord_kernels.indexed.api import run_gemm
from chord_kernels.routing import align_block_size
from chord_bench.timing import interleaved

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
res = []
for name in CASES:
    e, tokens, top_k, bm, tok_e, ws = gemms(name)
    g = torch.Generator(device=dev).manual_seed(tokens + e)
    ids = torch.rand(tokens, e, generator=g, device=dev).argsort(dim=1)[:, :top_k].to(torch.int32).contiguous()
    r = align_block_size(ids, bm, e)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    cap = r.expert_ids.numel()
    for w_ns, act, rows in ws:
        w = chord_kernels.pack("indexed", *random_quantized(e, w_ns.n, w_ns.k, generator=g, device=dev), profile=w_ns.profile)
        b = base(w, bm, cap, tok_e)
        if not isinstance(b, W.WgmmaConfig):
            continue
        if rows:
            a = (torch.randn(cap * bm, w.k, generator=g, device=dev) * 0.5).to(torch.bfloat16)
            tw = torch.rand(tokens * top_k, generator=g, device=dev)
        else:
            a = (torch.randn(tokens, w.k, generator=g, device=dev) * 0.5).to(torch.bfloat16)
            tw = None
        n_out = w.n // 2 if act else w.n
        fns, outs = {}, {}
        for tag, c in (("scan", b), ("loop", IncCfg(**dataclasses.asdict(b), inc=INC))):
            outs[tag] = torch.full((tokens * top_k, n_out), float("nan"), dtype=torch.bfloat16, device=dev)
            fns[tag] = lambda c=c, o=outs[tag], a=a, w=w, act=act, rows=rows, tw=tw: run_gemm(
                a, w, route, block_m=bm, top_k=1 if rows else top_k, topk_weights=tw, out=o, config=c, activation=act,
                block_rows=rows, num_slots=tokens * top_k if rows else None, tok_e=tok_e)
        for f in fns.values():
            f()
        torch.cuda.synchronize()
        same = torch.equal(outs["scan"], outs["loop"])
        runs = []
        for rep in range(3):
            order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
            tm = interleaved({t: fns[t] for t in order}, rounds=5)
            runs.append({t: tm[t].median_us() for t in fns})
        gname = "gate_up" if act else "down"
        res.append({"name": name, "gemm": gname, "config": str(b), "us": runs, "same": same})
        print(f"{name:11s} {gname:7s} loop " + " ".join(f"{x['loop']:7.1f}" for x in runs) + " | scan "
              + " ".join(f"{x['scan'] / x['loop'] - 1:+.2%}" for x in runs) + ("" if same else " DIFF"), flush=True)
        json.dump(res, open(f"{OUT}/compact_ab.json", "w"), indent=1)
