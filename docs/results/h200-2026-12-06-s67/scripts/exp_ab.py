# ruff: noqa
"""Session 67: where the CTA pair's time goes on the items of two 256-K stages. The planned gate_up kernels
unpaired ("plan"), paired ("pair"), and paired with wgmma.cuh's CHORD_EXP_PAIR hooks: "nowait" (the pusher does
not wait for its CTA's gathers), "nopush" (nothing pushed: each CTA has only its own half), "neither", and
"pusher" (a candidate: warp 1 only pushes, warps 0, 2, 3 gather: its waits no longer hold up gathers; right outputs).
Outputs of the hooks are wrong by design; plan and pair are compared bit for bit. Gate_up with SiLU-and-mul
and the output in routing order, as the layer runs it. Interleaved, three timings.
argv: precompile [threads] | time [shape,...]"""
import dataclasses, functools, json, os, sys, types

import torch
from chord_kernels import indexed
from chord_kernels.indexed.api import launch_plan
from chord_kernels.indexed.heuristics import choose_block_m
from chord_kernels.indexed.planner import cached_plan, config_for_rows
from chord_kernels.indexed.wgmma import ARCH, ENTRY, WgmmaConfig
from chord_kernels.jit.kernel import CudaKernel


@dataclasses.dataclass(frozen=True)
class Exp(WgmmaConfig):
    exp: int = 0
    pf: int = 0
    l2pf: int = 0
    pol: int = 0

    def kernel(self):
        return _exp_kernel(self)


@functools.cache
def _exp_kernel(cfg):
    return CudaKernel(name="indexed_wgmma", source=cfg.source(), entry=ENTRY, arch=ARCH,
                      flags=(f"-DCHORD_EXP_PAIR={cfg.exp}", f"-DCHORD_EXP_PREFETCH={cfg.pf}",
                             f"-DCHORD_EXP_L2PF={cfg.l2pf}", f"-DCHORD_EXP_ACT_POLICY={cfg.pol}"))


SMS, TOP_K, K1 = 132, 8, 7168
# name: (local experts, global experts, N, tokens, profile)
SHAPES = {"ep43": (48, 384, 4096, 43 * 48, "h200_ep8"), "ep64": (48, 384, 4096, 64 * 48, "h200_ep8"),
          "tp8192": (384, 384, 512, 8192, "h200_tp8"), "ep341": (48, 384, 4096, 341 * 48, "h200_ep8"),
          "ep128": (48, 384, 4096, 128 * 48, "h200_ep8"),
          **{f"tp{t}": (384, 384, 512, t, "h200_tp8") for t in (1024, 2048, 4096, 6144, 12288)}}


def variants(n, bm, cap, tok_e):
    plan = cached_plan(n, K1, bm, cap, SMS, ARCH, config_for_rows(n, K1, bm, ARCH, tok_e)).config
    if os.environ.get("PREFETCH"):  # the plan as it is (a pair, a split tail), with the rows of stage s + d
        # prefetched into L2 at stage s (prefetch.global.L2 per 128-byte line; session 67 call c: one bulk prefetch
        # per row, CHORD_EXP_BULK_PF)
        pfields = {f.name: getattr(plan, f.name) for f in dataclasses.fields(WgmmaConfig)}
        return {"plan": plan, **{f"pf{d}": Exp(**pfields, pf=d) for d in (1, 2)}}
    plan = dataclasses.replace(plan, cta_pair=False)
    pair = dataclasses.replace(plan, cta_pair=True, tail_parts=0, tail_blocks=False)
    fields = {f.name: getattr(pair, f.name) for f in dataclasses.fields(WgmmaConfig)}
    return {"plan": plan, "pair": pair, "nowait": Exp(**fields, exp=1), "nopush": Exp(**fields, exp=2),
            "neither": Exp(**fields, exp=3), "pusher": Exp(**fields, exp=4)}


def shape_facts(name):
    e, eg, n, tokens, profile = SHAPES[name]
    w = types.SimpleNamespace(n=n, k=K1, num_experts=e, profile=profile, small_scales=True)
    bm = choose_block_m(w, tokens * TOP_K * e // eg)
    return e, eg, n, tokens, profile, w, bm, tokens * TOP_K * e / eg / e


if sys.argv[1] == "precompile":
    from concurrent.futures import ThreadPoolExecutor
    ks = {}
    for name in SHAPES:
        e, eg, n, tokens, profile, w, bm, tok_e = shape_facts(name)
        slots = tokens * TOP_K * e // eg
        for cap in range(slots // bm, slots // bm + e + 2):
            for c in variants(n, bm, cap, tok_e).values():
                kk = launch_plan(w, bm, cap, SMS, ARCH, config=c, activation="silu").config.kernel()
                ks[(kk.source, kk.flags)] = kk
    with ThreadPoolExecutor(int(sys.argv[2]) if len(sys.argv) > 2 else 2) as ex:
        list(ex.map(lambda kk: kk.compile(ARCH), ks.values()))
    print(len(ks), "kernels")
    sys.exit(0)

import chord_kernels
from chord_kernels.formats import random_quantized
from chord_kernels.indexed.api import run_gemm
from chord_kernels.routing import align_block_size
from chord_bench.timing import interleaved

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
res = []
for name in (sys.argv[2].split(",") if len(sys.argv) > 2 else SHAPES):
    e, eg, n, tokens, profile, _, bm, tok_e = shape_facts(name)
    g = torch.Generator(device=dev).manual_seed(66)
    w13 = chord_kernels.pack("indexed", *random_quantized(e, n, K1, generator=g, device=dev), profile=profile)
    ids = torch.rand(tokens, eg, generator=g, device=dev).topk(TOP_K, dim=1).indices.to(torch.int32).contiguous()
    emap = None
    if e < eg:
        emap = torch.full((eg,), -1, dtype=torch.int32, device=dev)
        emap[:e] = torch.arange(e, dtype=torch.int32, device=dev)
    a1 = (torch.randn(tokens, K1, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    r = align_block_size(ids, bm, eg, emap)
    cap = indexed.routing_capacity(r.sorted_token_ids, r.expert_ids, bm)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    real = (r.sorted_token_ids.long()[:cap * bm] < tokens * TOP_K) & (r.expert_ids[:cap].repeat_interleave(bm) >= 0)
    ws = indexed.new_workspace(indexed.max_workspace_bytes(w13, device=dev) * 4, dev)
    fns, outs = {}, {}
    vs = variants(n, bm, cap, tok_e)
    for tag, c in vs.items():
        outs[tag] = torch.full((cap * bm, n // 2), float("nan"), dtype=torch.bfloat16, device=dev)
        fns[tag] = lambda o=outs[tag], c=c: run_gemm(a1, w13, route, block_m=bm, top_k=TOP_K, out=o, config=c,
                                                     workspace=ws, activation="silu", out_position=True,
                                                     zero_nonlocal=False)
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    clusters = None
    try:  # how many two-CTA clusters of the paired kernel fit the GPU at once (66 on 132 SMs: every SM)
        from cuda.bindings import driver as drv
        lp = launch_plan(w13, bm, cap, SMS, ARCH, config=vs["pair"], activation="silu")
        fn = lp.config.kernel()._function(dev)
        cfg = drv.CUlaunchConfig()
        cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = lp.grid, 1, 1
        cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = lp.threads, 1, 1
        cfg.sharedMemBytes = lp.smem
        err, clusters = drv.cuOccupancyMaxActiveClusters(fn, cfg)
        clusters = int(clusters) if int(err) == 0 else f"error {err}"
    except Exception as exc:  # noqa: BLE001
        clusters = f"{type(exc).__name__}: {exc}"
    finite = bool(torch.isfinite(outs["plan"][real]).all())
    same = all(torch.equal(outs["plan"][real], outs[t][real]) for t in outs if t in ("pair", "pusher") or t.startswith(("pf", "l2", "act")))
    runs = []
    for rep in range(3):
        order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
        tm = interleaved({t: fns[t] for t in order}, rounds=int(os.environ.get("ROUNDS", "7")))
        runs.append({t: tm[t].median_us() for t in fns})
    res.append({"shape": name, "block_m": bm, "tok_e": tok_e, "plan_finite": finite, "same": same, "us": runs,
                "max_active_clusters": clusters,
                "config": str(vs["plan"])})
    print(f"{name:7s} bm {bm:3d} plan " + " ".join(f"{x['plan']:7.1f}" for x in runs)
          + "".join(f" | {t} " + " ".join(f"{x[t] / x['plan'] - 1:+.1%}" for x in runs) for t in fns if t != "plan")
          + ("" if finite and same else f" FINITE={finite} SAME={same}") + f" clusters {clusters}", flush=True)
    json.dump(res, open(f"{OUT}/exp_ab.json", "w"), indent=1)
    del w13, a1, ws, outs, fns
    torch.cuda.empty_cache()
