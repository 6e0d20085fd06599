# ruff: noqa
"""Session 75: the local top-k sum's CTAs per token (grid y; each CTA loops over chunk blocks y, y + Y, ...):
Y = 1 (session 8's kernel: one CTA per token), 2, 3, 4, 5 and 7 (one chunk per thread at 7168 channels), the
shipped rule (ops.topk.chunk_blocks), and the Triton stand-in of vLLM's moe_fused_mul_sum, interleaved CUDA graphs
of 20 launches, five rounds; each Y bit for bit the shipped launch, which equals topk_sum of the local rows.
TP8: top-8 of 384, every choice local; EP8: 48 of 384 experts local through a map."""
import json, os
import torch
from chord_kernels.jit import i32
from chord_kernels.ops import local_topk_sum, topk_sum
from chord_kernels.ops.topk import chunk_blocks, local_topk_sum_kernel
from chord_bench import layer_kernels

dev = torch.device("cuda")
H, TOPK = 7168, 8
sms = torch.cuda.get_device_properties(0).multi_processor_count
kern = local_topk_sum_kernel()
SHAPES = [("tp8_64", 64, None), ("tp8_160", 160, None), ("tp8_512", 512, None), ("tp8_1024", 1024, None),
          ("tp8_8192", 8192, None), ("ep8_5", 240, 48), ("ep8_8", 384, 48), ("ep8_16", 768, 48),
          ("ep8_43", 43 * 48, 48), ("ep8_128", 6144, 48)]
results = {}
for label, tokens, local in SHAPES:
    g = torch.Generator(device=dev).manual_seed(tokens)
    ids = torch.rand(tokens, 384, generator=g, device=dev).topk(TOPK, dim=1).indices.to(torch.int32).contiguous()
    emap, n_local = None, 384
    if local:
        emap = torch.full((384,), -1, dtype=torch.int32, device=dev)
        emap[:local] = torch.arange(local, dtype=torch.int32, device=dev)
        n_local = local
    rows = torch.randn(tokens * TOPK, H, generator=g, device=dev).bfloat16()
    is_local = (ids < n_local).reshape(-1)
    rows[~is_local] = float("nan")  # never read
    want = topk_sum(torch.where(is_local[:, None], rows, 0).view(tokens, TOPK, H))
    shipped = torch.full((tokens, H), float("nan"), dtype=torch.bfloat16, device=dev)
    local_topk_sum(rows, ids, num_local_experts=n_local, expert_map=emap, out=shipped)
    ok = torch.equal(shipped, want)
    chunks = H // 8
    rule = chunk_blocks(tokens, chunks, sms)
    outs, runs = {}, {}
    for y in (1, 2, 3, 4, 5, 7):
        out = torch.full((tokens, H), float("nan"), dtype=torch.bfloat16, device=dev)
        args = (rows, ids, emap, out, i32(chunks), i32(TOPK), i32(384 if emap is not None else 0), i32(n_local))
        launch = (lambda grid=(tokens, y), args=args: kern.launch(grid, (128,), args))
        launch(); torch.cuda.synchronize()
        outs[f"y{y}"] = torch.equal(out, shipped)
        gr = torch.cuda.CUDAGraph()
        with torch.cuda.graph(gr):
            for _ in range(20):
                launch()
        runs[f"y{y}"] = gr
    pos = torch.where(is_local, torch.arange(tokens * TOPK, device=dev, dtype=torch.int32), -1).to(torch.int32)
    tw = torch.ones(tokens, TOPK, device=dev)
    vout = torch.empty(tokens, H, dtype=torch.bfloat16, device=dev)
    rows0 = torch.where(is_local[:, None], rows, 0)
    layer_kernels.gather_mul_sum(rows0, pos, tw, vout); torch.cuda.synchronize()
    gr = torch.cuda.CUDAGraph()
    with torch.cuda.graph(gr):
        for _ in range(20):
            layer_kernels.gather_mul_sum(rows0, pos, tw, vout)
    runs["triton"] = gr
    times = {name: [] for name in runs}
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(5):
        for name, gr in runs.items():
            gr.replay(); torch.cuda.synchronize()
            s.record(); gr.replay(); e.record(); torch.cuda.synchronize()
            times[name].append(s.elapsed_time(e) / 20 * 1000)
    med = {n: sorted(t)[len(t) // 2] for n, t in times.items()}
    results[label] = {"tokens": tokens, "rule_y": rule, "shipped_equals_topk_sum": ok, "bit_equal": outs, "us": times, "median": med}
    print(f"{label:9s} tok {tokens:5d} rule y{rule} ok={ok} equal={all(outs.values())} " +
          " ".join(f"{n} {m:6.1f}" for n, m in med.items()), flush=True)
json.dump(results, open(os.path.join(os.environ.get("OUT", "."), "topk_y.json"), "w"), indent=1)
