# ruff: noqa
"""Session 34: the grouped masked mode (DeepEP low-latency buffers, 48 groups x 256 rows, gate_up with
SiLU fused then down, as chord-vllm runs them) at 56-, 64- and 72-token blocks where the tok_e + 1.9
sigma tile is 64 (44-50 rows per group): interleaved, three timings, the outputs bit for bit.
argv: STUDY precompile [threads] | STUDY time (each call ran its own copy: masked_blk.py, masked_blk2.py)."""
import dataclasses, json, math, os, sys

from chord_kernels.indexed import planner as P
from chord_kernels.indexed.api import _silu_mul_twin, _tma_rows_twin

G, CAP, H, N13 = 48, 256, 7168, 4096
STUDY = sys.argv[1]  # the call: d (56 against 64, masked_blk.json) or f (and 72, masked_blk2.json)
CASES = {"d": [(m, seed) for m in (44, 48, 50) for seed in (0, 1)],
         "f": [(m, seed) for m in (49, 50) for seed in (2, 3, 4)]}[STUDY]
BLOCKS = {"d": (64, 56), "f": (64, 56, 72)}[STUDY]

if sys.argv[2] == "precompile":
    from concurrent.futures import ThreadPoolExecutor
    ks = {}
    for bm in BLOCKS:
        for n, k in ((N13, H), (H, N13 // 2)):
            for c in P.configs_for(n, k, bm, "sm_90a"):
                t = _tma_rows_twin(c)
                for u in {t, _silu_mul_twin(t, n) or t}:
                    u = dataclasses.replace(u, subnormal=True)
                    ks[u.kernel().source] = u.kernel()
    with ThreadPoolExecutor(int(sys.argv[3]) if len(sys.argv) > 3 else 2) as ex:
        list(ex.map(lambda k: k.compile("sm_90a"), ks.values()))
    print(len(ks), "kernels")
    sys.exit(0)

import torch
import chord_kernels
from chord_kernels.indexed import MaskedRows, gemm_masked
from chord_kernels.formats import random_quantized
from chord_bench.timing import interleaved

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
ROUNDS = int(os.environ.get("ROUNDS", "7"))
res = []
for m, seed in CASES:
    g = torch.Generator(device=dev).manual_seed(1000 * seed + m)
    w13 = chord_kernels.pack("indexed", *random_quantized(G, N13, H, generator=g, device=dev), profile="h200_ep8")
    w2 = chord_kernels.pack("indexed", *random_quantized(G, H, N13 // 2, generator=g, device=dev), profile="h200_ep8")
    ids = torch.randint(0, G, (G * m,), generator=g, device=dev)
    counts = torch.bincount(ids, minlength=G).clamp(max=CAP).to(torch.int32).contiguous()
    rows = MaskedRows(counts, CAP)
    hidden = (torch.randn(G * CAP, H, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    fns, outs = {}, {}
    for bm in BLOCKS:
        act = torch.empty(G * CAP, N13 // 2, dtype=torch.bfloat16, device=dev)
        outs[bm] = torch.full((G * CAP, H), float("nan"), dtype=torch.bfloat16, device=dev)

        def fn(bm=bm, act=act, out=outs[bm]):
            gemm_masked(hidden, w13, rows, block_m=bm, out=act, activation="silu", expected_m=float(m))
            gemm_masked(act, w2, rows, block_m=bm, out=out, expected_m=float(m))
        fns[bm] = fn
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    valid = (torch.arange(CAP, device=dev)[None, :] < counts[:, None].long()).reshape(-1)
    same = all(torch.equal(outs[BLOCKS[0]][valid], o[valid]) for o in outs.values())
    nan = any(bool(o[valid].isnan().any()) for o in outs.values())
    runs = []
    for rep in range(3):
        order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
        tm = interleaved({t: fns[t] for t in order}, rounds=ROUNDS)
        runs.append({t: tm[t].median_us() for t in fns})
    c = counts.tolist()
    blocks = {bm: sum(math.ceil(x / bm) for x in c) for bm in BLOCKS}
    res.append({"rows_per_group": m, "seed": seed, "max_rows": max(c), "blocks": blocks, "us": runs, "same": same, "nan": nan})
    print(f"masked{m}_s{seed} max rows {max(c):4d} blocks {blocks} bm=64 " + " ".join(f"{x[64]:7.1f}" for x in runs)
          + "".join(f" | bm={b} " + " ".join(f"{x[b] / x[64] - 1:+.1%}" for x in runs) for b in BLOCKS[1:]) + ("" if same and not nan else " DIFF/NAN"),
          flush=True)
    json.dump(res, open(f"{OUT}/masked_blk{'2' if STUDY == 'f' else ''}.json", "w"), indent=1)
