# ruff: noqa
"""Session 73 (for 74): where Chord's layer spends its time at a decode shape — each CUDA kernel of
indexed.moe_experts (the planned block, as chord_bench.layer runs it) under torch.profiler, averaged over
20 calls after warm-up. Session 73's layer run had TP8 at 160 tokens 3 % slower than humming's GEMMs with
vLLM's steps on an H100 (422.1 against 409.9 µs). argv: tp8_160 | ep8_8 ... (EP8: rows per expert)"""
import sys

import torch
import chord_kernels
from chord_kernels import indexed
from chord_kernels.formats import random_quantized
from chord_kernels.routing import align_block_size

dev = torch.device("cuda")
for name in sys.argv[1:]:
    kind, size = name.split("_")
    EP = kind == "ep8"
    E, G, TOP_K, H, I = (48, 384, 8, 7168, 2048) if EP else (384, 384, 8, 7168, 256)
    tokens = int(size) * G // TOP_K if EP else int(size)
    g = torch.Generator(device=dev).manual_seed(73)
    prof = "h200_ep8" if EP else "h200_tp8"
    w13 = chord_kernels.pack("indexed", *random_quantized(E, 2 * I, H, generator=g, device=dev), profile=prof)
    w2 = chord_kernels.pack("indexed", *random_quantized(E, H, I, generator=g, device=dev), profile=prof)
    ids = torch.rand(tokens, G, generator=g, device=dev).topk(TOP_K, dim=1).indices.to(torch.int32).contiguous()
    tw = torch.rand(tokens, TOP_K, generator=g, device=dev)
    hidden = (torch.randn(tokens, H, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    emap = None
    if EP:
        emap = torch.full((G,), -1, dtype=torch.int32, device=dev)
        emap[:E] = torch.arange(E, dtype=torch.int32, device=dev)
    bm = indexed.layer_block_m(w13, w2, tokens * TOP_K * E // G)
    r = align_block_size(ids, bm, G, emap)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    out = torch.empty(tokens, H, dtype=torch.bfloat16, device=dev)
    run = lambda: indexed.moe_experts(hidden, w13, w2, route, tw, ids, block_m=bm, expert_map=emap, out=out)
    graph = torch.cuda.CUDAGraph()
    for _ in range(3):
        run()
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        run()
    for _ in range(5):
        graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(20):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    print(f"{name}: tokens {tokens}, block {bm}, layer (graph replay) {start.elapsed_time(end) / 20 * 1000:.1f} µs", flush=True)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
        for _ in range(20):
            graph.replay()
        torch.cuda.synchronize()
    print(p.key_averages().table(sort_by="cuda_time_total", row_limit=12, max_name_column_width=60), flush=True)
    del w13, w2, hidden, out, graph
    torch.cuda.empty_cache()
