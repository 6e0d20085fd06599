# ruff: noqa
"""Session 23: does the last wave cost what it idles? EP8's middle-shape GEMMs (gate_up N = 4096,
K = 7168; down N = 7168, K = 2048) with exactly 16 rows on each of A active experts (32-token
blocks: one item each), A from 40 to 58: units = A x N tiles (16 / 28), waves = units / SMs.
Interleaved CUDA graphs, all A of one GEMM in one call. A staircase in time against A (flat within
a wave count, a step past a multiple of the SM count) says the last wave idles; a line says not.
argv[1] == precompile: compile only."""
import dataclasses, json, os, sys
import torch
import chord_kernels
from chord_kernels.formats import random_quantized
from chord_kernels.indexed.api import run_gemm
from chord_kernels.indexed.planner import configs_for
from chord_kernels.indexed.wgmma import max_stages
from chord_kernels.routing import align_block_size

H, I, EXPERTS, ROWS, BM = 7168, 2048, 64, 16, 32
MTS = [int(m) for m in os.environ.get("MTS", "2").split(",")]  # tiles per warpgroup (down only: 1 = 128-channel N tiles)
GEMMS = os.environ.get("GEMMS", "gate_up,down").split(",")


def config(n, k, mt):
    c = configs_for(n, k, BM, "sm_90a")[0]
    return c if mt == c.mt else dataclasses.replace(c, mt=mt, row_widths=(), stages=min(8, max_stages(BM, mt, c.bk)))


ACTIVE = [int(a) for a in os.environ.get("ACTIVE", "40,44,46,47,48,49,50,52,54,56,57,58").split(",")]
if sys.argv[1:2] == ["precompile"]:
    from concurrent.futures import ThreadPoolExecutor
    ks = {config(n, k, mt).kernel().source: config(n, k, mt).kernel() for n, k in ((2 * I, H), (H, I)) for mt in MTS}
    for bm in (24, 32, 48, 56):
        base = [c for c in configs_for(H, I, bm, "sm_90a") if c.items == 1][0]
        for c in (base, dataclasses.replace(base, mt=1, row_widths=(), stages=min(8, max_stages(bm, 1, base.bk)))):
            ks[c.kernel().source] = c.kernel()
    with ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda kk: kk.compile("sm_90a"), ks.values()))
    print(len(ks), "kernels compiled", flush=True)
    sys.exit(0)

from chord_bench.timing import interleaved
dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
sms = torch.cuda.get_device_properties(dev).multi_processor_count
g = torch.Generator(device=dev).manual_seed(23)
w13 = chord_kernels.pack("indexed", *random_quantized(EXPERTS, 2 * I, H, generator=g, device=dev), profile="h200_ep8")
w2 = chord_kernels.pack("indexed", *random_quantized(EXPERTS, H, I, generator=g, device=dev), profile="h200_ep8")
res = {}
for name, w, k in (("gate_up", w13, H), ("down", w2, I)):
    if name not in GEMMS:
        continue
    fns, units = {}, {}
    for a_, mt in [(a_, mt) for a_ in ACTIVE for mt in MTS]:
        tokens = a_ * ROWS
        ids = (torch.arange(tokens, device=dev, dtype=torch.int32) // ROWS).reshape(-1, 1).contiguous()
        r = align_block_size(ids, BM, EXPERTS)
        route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
        x = (torch.randn(tokens, k, device=dev, generator=g) * 0.5).to(torch.bfloat16)
        out = torch.empty(tokens, w.n, dtype=torch.bfloat16, device=dev)
        cfg = config(w.n, k, mt)
        fns[(a_, mt)] = lambda x=x, route=route, out=out, cfg=cfg: run_gemm(x, w, route, block_m=BM, top_k=1, out=out, config=cfg)
        fns[(a_, mt)]()
        units[(a_, mt)] = a_ * w.n // (128 * mt)
    torch.cuda.synchronize()
    us = {key: t.median_us() for key, t in interleaved(fns, rounds=7).items()}
    res[name] = [{"active": a_, "mt": mt, "units": units[(a_, mt)], "waves": units[(a_, mt)] / sms, "us": us[(a_, mt)]}
                 for (a_, mt) in fns]
    for rec in res[name]:
        print(f"{name:7s} A {rec['active']:2d} mt {rec['mt']} units {rec['units']:5d} waves {rec['waves']:5.2f} "
              f"{rec['us']:7.1f} us  {rec['us'] / rec['active']:6.2f} us per expert", flush=True)
json.dump(res, open(f"{OUT}/tail_ab.json", "w"), indent=1)

# The EP8 down on Kimi routing (top-8 of 384, 48 local experts) at the planned block, mt 2 against 1.
from chord_kernels.indexed import choose_block_m
E, TOPK = 384, 8
real = []
for tokens in [int(t) for t in os.environ.get("EP8_TOKENS", "576,768,1536,2064").split(",")]:
    gen = torch.Generator(device=dev).manual_seed(tokens)
    ids = torch.softmax(torch.randn(tokens, E, device=dev, generator=gen), dim=-1).topk(TOPK, dim=-1)[1].to(torch.int32)
    emap = torch.full((E,), -1, dtype=torch.int32, device=dev)
    emap[:48] = torch.arange(48, dtype=torch.int32, device=dev)
    w2e = chord_kernels.pack("indexed", *random_quantized(48, H, I, generator=g, device=dev), profile="h200_ep8")
    bm = choose_block_m(w2e, tokens * TOPK * 48 // E)
    r = align_block_size(ids, bm, E, emap)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    act = (torch.randn(tokens * TOPK, I, device=dev, generator=gen) * 0.5).to(torch.bfloat16)
    fns, outs = {}, {}
    for mt in (2, 1):
        base = [c for c in configs_for(H, I, bm, "sm_90a") if c.items == 1][0]
        cfg = base if mt == 2 else dataclasses.replace(base, mt=1, row_widths=(), stages=min(8, max_stages(bm, 1, base.bk)))
        o = torch.full((tokens * TOPK, H), float("nan"), dtype=torch.bfloat16, device=dev)
        outs[mt] = o
        fns[mt] = lambda cfg=cfg, o=o: run_gemm(act, w2e, route, block_m=bm, top_k=1, out=o, config=cfg, zero_nonlocal=False)
        fns[mt]()
    torch.cuda.synchronize()
    ok = ~torch.isnan(outs[2].float()).any(dim=1)
    same = torch.equal(outs[2][ok], outs[1][ok])
    us = {mt: t.median_us() for mt, t in interleaved(fns, rounds=7).items()}
    real.append({"tokens": tokens, "rows_per_expert": tokens * TOPK / E, "block_m": bm, "us": us, "bit_identical": same})
    print(f"ep8 down {tokens:5d} tokens ({tokens * TOPK / E:5.1f} rows/e, bm {bm}): mt2 {us[2]:7.1f} mt1 {us[1]:7.1f} "
          f"({us[1] / us[2] - 1:+.1%}) bits {same}", flush=True)
res["ep8_down"] = real
json.dump(res, open(f"{OUT}/tail_ab.json", "w"), indent=1)
