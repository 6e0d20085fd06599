# ruff: noqa
"""Session 34: the whole layer (moe_experts: gate_up with SiLU fused, down with the top-k sum) at
routing-block sizes, each on its own routing, interleaved, three timings, every output bit for bit
against the first block's. argv: STUDY precompile [threads] | STUDY time (STUDY: the call, a b c f h;
each call ran its own copy of this file with that study's cases, layer_blk.py to layer_blk4.py)."""
import dataclasses, json, math, os, sys

from chord_kernels.indexed import planner as P
from chord_kernels.indexed.api import _silu_mul_twin, _tma_rows_twin

# (name, experts, N13, K13 (= H), tokens, top_k, block sizes: the one compared against first, seed)
def _blocks(e, slots):
    """The tok_e + 1.9 sigma tile (as choose_block_m gave it before this session), then the tiles of
    0.5, 1.0 and 1.5 sigma that differ from it."""
    t = slots / e
    planned = max(32, 8 * math.ceil((t + 1.9 * math.sqrt(t)) / 8))
    alts = sorted({max(32, 8 * math.ceil((t + c * math.sqrt(t)) / 8)) for c in (0.5, 1.0, 1.5)} - {planned})
    return (planned, *alts)


def _around(e, slots, others):
    planned = _blocks(e, slots)[0]
    return (planned, *[b for b in others if b != planned])


STUDIES = {
    # call a: a few points against one step either way
    "a": [("tp8_768", 384, 512, 7168, 768, 8, (24, 32), None), ("tp8_1024", 384, 512, 7168, 1024, 8, (32, 24), None),
          ("tp8_1280", 384, 512, 7168, 1280, 8, (40, 32), None), ("ep8_tok43", 48, 4096, 7168, 48 * 43, 1, (56, 48, 64), None),
          ("ep8_tok36", 48, 4096, 7168, 48 * 36, 1, (48, 56), None)],
    # call b: the planned tile against one step smaller, two draws
    "b": [(f"tp8_{m}_s{seed}", 384, 512, 7168, m, 8, _blocks(384, 8 * m), seed)
          for m in (1152, 1280, 1408, 1536, 1792, 2048) for seed in (0, 1)]
         + [(f"ep8_tok{t}_s{seed}", 48, 4096, 7168, 48 * t, 1, _blocks(48, 48 * t), seed)
            for t in (24, 28, 32, 36, 40, 43, 48) for seed in (0, 1)],
    # call c: 56 / 64 / 72 where the tile came out at 64 and beyond
    "c": [(f"ep8_tok{t}_s{seed}", 48, 4096, 7168, 48 * t, 1, _around(48, 48 * t, (56, 64, 72)), seed)
          for t in (44, 46, 48, 50, 52, 56) for seed in (0, 1)]
         + [(f"tp8_{m}_s{seed}", 384, 512, 7168, m, 8, _around(384, 8 * m, (56, 64, 72)), seed)
            for m in (2112, 2304, 2432, 2688) for seed in (0, 1)],
    # call f: more draws, TP8 32 against 40 and EP8 at the band's upper end
    "f": [(f"tp8_{m}_s{seed}", 384, 512, 7168, m, 8, (40, 32), seed) for m in (1152, 1216, 1280, 1344) for seed in (2, 3, 4)]
         + [(f"ep8_tok{t}_s{seed}", 48, 4096, 7168, 48 * t, 1, (56, 72, 64), seed) for t in (49, 50) for seed in (2, 3, 4)],
    # call h: the prefill blocks against one-block items of the tok_e + 1.9 sigma tile (64 x 2 items from 64 rows
    # per expert) and against two 72- / 80-token items per expert (the 24 x 7 wide items from 120)
    "h": [(f"ep8_tok{t}_s{seed}", 48, 4096, 7168, 48 * t, 1, bms, seed)
          for t, bms in ((72, (64, 80, 96)), (85, (64, 104)), (100, (64, 120)), (128, (24, 72, 80)), (140, (24, 72, 80)))
          for seed in (0, 1)]
         + [(f"tp8_{m}_s{seed}", 384, 512, 7168, m, 8, bms, seed)
            for m, bms in ((3456, (64, 80, 96)), (4096, (64, 104)), (6144, (24, 72, 80))) for seed in (0, 1)],
}
STUDY = sys.argv[1]
CASES = [c for c in STUDIES[STUDY] if len(c[6]) > 1]


def shapes(case):
    name, e, n13, h, tokens, top_k, bms, seed = case
    return ((n13, h), (h, n13 // 2))


if sys.argv[2] == "precompile":
    from concurrent.futures import ThreadPoolExecutor
    ks = {}
    for case in CASES:
        for bm in case[6]:
            for n, k in shapes(case):
                for c in P.configs_for(n, k, bm, "sm_90a"):
                    for t in {c, _tma_rows_twin(c)}:
                        for u in {t, _silu_mul_twin(t, n) or t}:
                            u = dataclasses.replace(u, subnormal=True)
                            ks[u.kernel().source] = u.kernel()
    with ThreadPoolExecutor(int(sys.argv[3]) if len(sys.argv) > 3 else 2) as ex:
        list(ex.map(lambda k: k.compile("sm_90a"), ks.values()))
    print(len(ks), "kernels", [(c[0], c[6]) for c in CASES])
    sys.exit(0)

import torch
import chord_kernels
from chord_kernels.indexed.api import moe_experts
from chord_kernels.formats import random_quantized
from chord_kernels.routing import align_block_size
from chord_bench.timing import interleaved

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
ROUNDS = int(os.environ.get("ROUNDS", "7"))
res = []
for case in CASES:
    name, e, n13, h, tokens, top_k, bms, seed = case
    g = torch.Generator(device=dev).manual_seed(tokens + e + (0 if seed is None else 1000 * seed))
    prof = "h200_tp8" if e == 384 else "h200_ep8"
    w13 = chord_kernels.pack("indexed", *random_quantized(e, n13, h, generator=g, device=dev), profile=prof)
    w2 = chord_kernels.pack("indexed", *random_quantized(e, h, n13 // 2, generator=g, device=dev), profile=prof)
    a = (torch.randn(tokens, h, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    ids = torch.rand(tokens, e, generator=g, device=dev).argsort(dim=1)[:, :top_k].to(torch.int32).contiguous()
    tw = torch.rand(tokens, top_k, generator=g, device=dev)
    counts = torch.bincount(ids.reshape(-1).long(), minlength=e).tolist()
    fns, outs = {}, {}
    for bm in bms:
        r = align_block_size(ids, bm, e)
        route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
        outs[bm] = torch.full((tokens, h), float("nan"), dtype=torch.bfloat16, device=dev)

        def fn(route=route, bm=bm, out=outs[bm]):
            moe_experts(a, w13, w2, route, tw, ids, block_m=bm, out=out)
        fns[bm] = fn
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    first = outs[bms[0]]
    same = all(torch.equal(first, o) for o in outs.values())
    nan = any(bool(o.isnan().any()) for o in outs.values())
    runs = []
    for rep in range(3):
        order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
        tm = interleaved({t: fns[t] for t in order}, rounds=ROUNDS)
        runs.append({t: tm[t].median_us() for t in fns})
    blocks = {bm: sum(math.ceil(c / bm) for c in counts) for bm in bms}
    res.append({"name": name, "block_ms": list(bms), "blocks": blocks, "max_rows": max(counts), "us": runs,
                "same": same, "nan": nan})
    print(f"{name:10s} max rows {max(counts):4d} blocks {blocks} planned bm={bms[0]} "
          + " ".join(f"{x[bms[0]]:7.1f}" for x in runs)
          + "".join(f" | bm={b} " + " ".join(f"{x[b] / x[bms[0]] - 1:+.1%}" for x in runs) for b in bms[1:])
          + ("" if same and not nan else " DIFF/NAN"), flush=True)
    json.dump(res, open(f"{OUT}/layer_blk{'' if STUDY == 'a' else {'b': 2, 'c': 3, 'f': 4, 'h': 5}[STUDY]}.json", "w"), indent=1)
