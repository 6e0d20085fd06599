# ruff: noqa
"""Session 46: the indexed routing (vLLM's, rows gathered by slot) on wide items of 16-token blocks (ten per item,
K loops at 8, 9, 10 blocks: 128 / 144 / 160 tokens) against the plan (24-token blocks in sevens / sixes), EP8
Kimi shapes (48 local experts of 384, top-8), gate_up from the hidden states, the down (top-k weighted) from rows
by slot; Poisson rows per expert, five interleaved timings, outputs compared bit for bit. Measured, not adopted."""
import dataclasses, json, os, sys
from concurrent.futures import ThreadPoolExecutor
from chord_kernels.indexed.wgmma import _wide_items, WIDE_CONSUMER_REGS

SHAPES = {"gate_up": (4096, 7168), "down": (7168, 2048)}


def w16(n, k, subnormal=False):
    return dataclasses.replace(_wide_items(n, k, 16, 10, (8, 9, 10), WIDE_CONSUMER_REGS), subnormal=subnormal)


if __name__ == "__main__" and sys.argv[1] == "compile":
    todo = [w16(n, k, True) for n, k in SHAPES.values()]
    with ThreadPoolExecutor(2) as p:
        list(p.map(lambda c: c.kernel().compile("sm_90a"), todo))
    print(len(todo), "compiled")

if __name__ == "__main__" and sys.argv[1] == "ab":
    import torch
    import chord_kernels
    from chord_kernels import indexed, routing
    from chord_kernels.formats import random_quantized
    from chord_bench.timing import interleaved

    dev = torch.device("cuda")
    OUT = os.environ.get("OUT", "/tmp")
    E, LOCAL, TOP_K = 384, 48, 8
    expert_map = torch.full((E,), -1, dtype=torch.int32, device=dev)
    expert_map[:LOCAL] = torch.arange(LOCAL, dtype=torch.int32, device=dev)
    res = []
    for per_expert in (121, 128, 135, 142):
        tokens = per_expert * E // TOP_K
        g = torch.Generator(device=dev).manual_seed(per_expert)
        ids = torch.argsort(torch.rand(tokens, E, generator=g, device=dev), dim=1)[:, :TOP_K].to(torch.int32)
        tw = torch.rand(tokens, TOP_K, generator=g, device=dev).reshape(-1)
        for gname, (n, k) in SHAPES.items():
            w = chord_kernels.pack("indexed", *random_quantized(LOCAL, n, k, generator=g, device=dev), profile="h200_ep8")
            if gname == "gate_up":
                a, top_k, weights = (torch.randn(tokens, k, generator=g, device=dev) * 0.5).to(torch.bfloat16), TOP_K, None
            else:
                a, top_k, weights = (torch.randn(tokens * TOP_K, k, generator=g, device=dev) * 0.5).to(torch.bfloat16), 1, tw
            r24 = routing.align_block_size(ids, 24, E, expert_map)
            r16 = routing.align_block_size(ids, 16, E, expert_map)
            ws = indexed.new_workspace(indexed.max_workspace_bytes(w, device=dev) * 4, dev)
            outs = {t: torch.full((tokens * TOP_K, n), float("nan"), dtype=torch.bfloat16, device=dev) for t in ("plan24", "w16")}
            fns = {"plan24": lambda: indexed.gemm(a, w, r24.sorted_token_ids, r24.expert_ids, r24.num_tokens_post_padded,
                                                  block_m=24, top_k=top_k, topk_weights=weights, out=outs["plan24"],
                                                  workspace=ws, tok_e=float(per_expert)),
                   "w16": lambda: indexed.gemm(a, w, r16.sorted_token_ids, r16.expert_ids, r16.num_tokens_post_padded,
                                               block_m=16, top_k=top_k, topk_weights=weights, out=outs["w16"],
                                               workspace=ws, config=w16(n, k))}
            for f in fns.values():
                f()
            torch.cuda.synchronize()
            local = (expert_map[ids.long()] >= 0).reshape(-1)
            same = torch.equal(outs["plan24"][local], outs["w16"][local])
            runs = []
            for rep in range(5):
                order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
                tm = interleaved({t: fns[t] for t in order}, rounds=11)
                runs.append({t: tm[t].median_us() for t in fns})
            res.append({"per_expert": per_expert, "gemm": gname, "us": runs, "same": same})
            print(f"{per_expert:4d} {gname:8s} plan24 " + " ".join(f"{x['plan24']:7.1f}" for x in runs)
                  + " | w16 " + " ".join(f"{100 * (x['w16'] / x['plan24'] - 1):+5.1f}" for x in runs) + " %"
                  + ("" if same else " DIFF"), flush=True)
            json.dump(res, open(f"{OUT}/idx16_ab.json", "w"), indent=1)
