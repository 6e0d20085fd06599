# ruff: noqa
"""Session 29: gate_up (SiLU fused) at 32-48-token blocks, the planned four consumer warpgroups
(per-step commits) against two warpgroups with whole K stages (per-group commits), interleaved in
one process, three timings, bit for bit. argv[1]: precompile [threads] | time."""
import dataclasses, json, math, os, sys

from chord_kernels.indexed import wgmma as W, planner as P
from chord_kernels.indexed.heuristics import choose_block_m

CASES = [(f"ep8_tok{t}_gu", 48, 4096, 7168, 48 * t, 1) for t in (17, 20, 24, 28, 32, 36)]
CASES += [(f"tp8_{m}_gu", 384, 512, 7168, 8 * m, 8) for m in (1024, 1280, 1536)]


class _W:
    def __init__(s, e):
        s.num_experts, s.profile = e, ("h200_tp8" if e == 384 else "h200_ep8")


def variants(case):
    name, e, n, k, slots, top_k = case
    bm = choose_block_m(_W(e), slots)
    four = P._rows_config(n, k, bm, slots / e)
    two = W.WgmmaConfig(block_m=bm, mt=2, bk=256, stages=min(W.max_stages(bm, 2, 256), 8), items=1,
                        dynamic=True, whole_stages=True)
    return bm, {"four": dataclasses.replace(four, silu_mul=True), "two": dataclasses.replace(two, silu_mul=True)}


if sys.argv[1] == "precompile":
    from concurrent.futures import ThreadPoolExecutor
    ks = {c.kernel().source: c.kernel() for case in CASES for c in variants(case)[1].values()}
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
OUT = os.environ.get("OUT", "/tmp")
ROUNDS = int(os.environ.get("ROUNDS", "9"))
res = []
for case in CASES:
    name, e, n, k, slots, top_k = case
    bm, vs = variants(case)
    g = torch.Generator(device=dev).manual_seed(slots + n)
    w = chord_kernels.pack("indexed", *random_quantized(e, n, k, generator=g, device=dev),
                           profile="h200_tp8" if e == 384 else "h200_ep8")
    tokens = slots // top_k
    a = (torch.randn(tokens, k, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    ids = torch.rand(tokens, e, generator=g, device=dev).argsort(dim=1)[:, :top_k].to(torch.int32).contiguous()
    r = align_block_size(ids, bm, e)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    fns, outs = {}, {}
    for tag, c in vs.items():
        outs[tag] = torch.full((slots, n // 2), float("nan"), dtype=torch.bfloat16, device=dev)

        def fn(out=outs[tag], c=c):
            run_gemm(a, w, route, block_m=bm, top_k=top_k, out=out, config=c, zero_nonlocal=False, activation="silu")
        fns[tag] = fn
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    same = torch.equal(outs["four"], outs["two"])
    nan = bool(outs["two"].isnan().any() or outs["four"].isnan().any())
    runs = []
    for rep in range(3):
        order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
        tm = interleaved({t: fns[t] for t in order}, rounds=ROUNDS)
        runs.append({t: tm[t].median_us() for t in fns})
    res.append({"name": name, "block_m": bm, "us": runs, "configs": {t: c.template_args() for t, c in vs.items()},
                "same": same, "nan": nan})
    print(f"{name:14s} bm={bm:3d} four " + " ".join(f"{x['four']:7.1f}" for x in runs) + " | two "
          + " ".join(f"{x['two'] / x['four'] - 1:+.1%}" for x in runs) + ("" if same and not nan else " DIFF/NAN"),
          flush=True)
    json.dump(res, open(f"{OUT}/four_ab.json", "w"), indent=1)
