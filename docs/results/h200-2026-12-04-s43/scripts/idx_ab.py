# ruff: noqa
"""Session 43: the indexed routing's wide items at 120-150 rows per expert on 32-token blocks (five per item,
widths 2, 4, 5, rows gathered) against the plan (24-token blocks, seven or six per item), one GEMM at a time,
interleaved, three timings; outputs compared bit for bit. argv: precompile [threads] | time."""
import dataclasses, json, math, os, sys

from chord_kernels.indexed import wgmma as W
from chord_kernels.indexed import planner as P
from chord_kernels.indexed.heuristics import choose_block_m

N_K = {"gu": (4096, 7168), "gus": (4096, 7168), "dn": (7168, 2048)}
CASES = [(f"ep8_{t}", 48, t) for t in (121, 128, 135, 142, 150)]


class _W:
    num_experts, profile = 48, "h200_ep8"


def variants(g, n, k, tok_e):
    bm = choose_block_m(_W(), int(48 * tok_e))
    plan = P.config_for_rows(n, k, bm, "sm_90a", tok_e) or P.configs_for(n, k, bm, "sm_90a")[0]
    w32 = dataclasses.replace(W.block_rows_wide_config(n, k), tma_rows=False)
    out = {"plan": (bm, plan), "w32": (32, w32)}
    if g == "gus":
        out = {t: (b, dataclasses.replace(c, silu_mul=True)) for t, (b, c) in out.items()}
    return {t: (b, dataclasses.replace(c, subnormal=True)) for t, (b, c) in out.items()}


if sys.argv[1] == "precompile":
    from concurrent.futures import ThreadPoolExecutor
    ks = {}
    for name, e, t in CASES:
        for g, (n, k) in N_K.items():
            for b, c in variants(g, n, k, t).values():
                ks[c.kernel().source] = c.kernel()
    with ThreadPoolExecutor(int(sys.argv[2]) if len(sys.argv) > 2 else 2) as ex:
        list(ex.map(lambda kk: kk.compile("sm_90a"), ks.values()))
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
ROUNDS = int(os.environ.get("ROUNDS", "7"))
DRAWS = int(os.environ.get("DRAWS", "2"))
res = []
for name, e, t in CASES:
    for g_name, (n, k) in N_K.items():
        for draw in range(DRAWS):
            gen = torch.Generator(device=dev).manual_seed(n + 31 * t + 1000 * draw)
            slots = 48 * t
            w = chord_kernels.pack("indexed", *random_quantized(e, n, k, generator=gen, device=dev), profile="h200_ep8")
            a = (torch.randn(slots, k, generator=gen, device=dev) * 0.5).to(torch.bfloat16)
            ids = torch.randint(0, e, (slots, 1), generator=gen, device=dev, dtype=torch.int32)
            silu = g_name == "gus"
            tw = torch.rand(slots, 1, generator=gen, device=dev) if g_name == "dn" else None
            outs, fns = {}, {}
            for tag, (bm, c) in variants(g_name, n, k, t).items():
                r = align_block_size(ids, bm, e)
                route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
                outs[tag] = torch.full((slots, n // 2 if silu else n), float("nan"), dtype=torch.bfloat16, device=dev)
                fns[tag] = lambda out=outs[tag], c=c, bm=bm, route=route: run_gemm(
                    a, w, route, block_m=bm, top_k=1, out=out, config=c, topk_weights=tw, zero_nonlocal=False,
                    activation="silu" if silu else None)
            for f in fns.values():
                f()
            torch.cuda.synchronize()
            same = torch.equal(outs["plan"], outs["w32"])
            nan = any(bool(o.isnan().any()) for o in outs.values())
            counts = torch.bincount(ids.view(-1).long(), minlength=e)
            runs = []
            for rep in range(3):
                order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
                tm = interleaved({x: fns[x] for x in order}, rounds=ROUNDS)
                runs.append({x: tm[x].median_us() for x in fns})
            res.append({"name": name, "gemm": g_name, "draw": draw, "rows": [int(counts.min()), int(counts.max())],
                        "us": runs, "same": same, "nan": nan})
            print(f"{name:8s} {g_name:3s} d{draw} rows {int(counts.min())}-{int(counts.max())} plan "
                  + " ".join(f"{x['plan']:7.1f}" for x in runs) + " | w32 "
                  + " ".join(f"{x['w32'] / x['plan'] - 1:+.1%}" for x in runs)
                  + ("" if same and not nan else " DIFF/NAN"), flush=True)
            json.dump(res, open(f"{OUT}/idx_ab.json", "w"), indent=1)
