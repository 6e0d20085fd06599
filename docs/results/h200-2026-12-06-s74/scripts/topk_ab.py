# ruff: noqa
"""Session 74: the standalone local top-k sum — one CTA per token looping over 16-byte chunks (the kernel
before) against a 2-D grid of one chunk per thread (128 or 256 threads a CTA, or two chunks per thread), and
the Triton stand-in of vLLM's moe_fused_mul_sum (chord_bench.layer's). Interleaved CUDA graphs of 20 launches,
five rounds; every variant bit for bit the shipped kernel (NaN-poisoned output), which is checked against
topk_sum of the rows with the non-local ones zeroed. Shapes: TP8 160 / 1024 / 8192 tokens (top-8 of 384, every
choice local), EP8 8 / 43 / 128 rows per expert (48 of 384 experts local, a map)."""
import json, os, sys
import torch
from chord_kernels.jit import CudaKernel, i32
from chord_kernels.ops import local_topk_sum, topk_sum

HEAD = '#include "chord/common/topk_sum.cuh"\n'
OLD = HEAD + r'''
extern "C" __global__ void __launch_bounds__(128) k(
    const uint4* __restrict__ rows, const int32_t* __restrict__ ids, const int32_t* __restrict__ expert_map,
    uint4* __restrict__ out, int chunks, int top_k, int num_global, int num_local) {
  const int64_t t = blockIdx.x;
  const uint32_t local = chord::local_choices(ids + t * top_k, top_k, expert_map, num_global, num_local);
  for (int c = threadIdx.x; c < chunks; c += blockDim.x)
    out[t * chunks + c] = chord::sum_choices(rows + t * top_k * chunks + c, chunks, local, top_k);
}'''
GRID = HEAD + r'''
extern "C" __global__ void __launch_bounds__(THREADS) k(
    const uint4* __restrict__ rows, const int32_t* __restrict__ ids, const int32_t* __restrict__ expert_map,
    uint4* __restrict__ out, int chunks, int top_k, int num_global, int num_local) {
  const int64_t t = blockIdx.x;
  const int c0 = blockIdx.y * blockDim.x * PER + threadIdx.x;
  if (c0 >= chunks) return;
  const uint32_t local = chord::local_choices(ids + t * top_k, top_k, expert_map, num_global, num_local);
#pragma unroll
  for (int i = 0; i < PER; ++i) {
    const int c = c0 + i * blockDim.x;
    if (c < chunks) out[t * chunks + c] = chord::sum_choices(rows + t * top_k * chunks + c, chunks, local, top_k);
  }
}'''
VARIANTS = {"old": (OLD, 128, 0), "grid128": (GRID, 128, 1), "grid256": (GRID, 256, 1), "grid128x2": (GRID, 128, 2)}
kernels = {}
for name, (src, threads, per) in VARIANTS.items():
    kernels[name] = CudaKernel(name=f"s74_topk_{name}", entry="k",
                               source=src.replace("THREADS", str(threads)).replace("PER", str(per)))
if sys.argv[1:] == ["compile"]:
    for kern in kernels.values():
        print(kern.compile("sm_90a"))
    sys.exit()

dev = torch.device("cuda")
H = 7168
SHAPES = [("tp8_160", 160, None), ("tp8_1024", 1024, None), ("tp8_8192", 8192, None),
          ("ep8_8", 384, 48), ("ep8_43", 43 * 48, 48), ("ep8_128", 6144, 48)]
results = {}
for label, tokens, local in SHAPES:
    g = torch.Generator(device=dev).manual_seed(tokens)
    ids = torch.rand(tokens, 384, generator=g, device=dev).topk(8, dim=1).indices.to(torch.int32).contiguous()
    emap = None
    n_local = 384
    if local:
        emap = torch.full((384,), -1, dtype=torch.int32, device=dev)
        emap[:local] = torch.arange(local, dtype=torch.int32, device=dev)
        n_local = local
    rows = torch.randn(tokens * 8, H, generator=g, device=dev).bfloat16()
    is_local = (ids < n_local).reshape(-1)
    rows[~is_local] = float("nan")  # never read
    want = topk_sum(torch.where(is_local[:, None], rows, 0).view(tokens, 8, H))
    shipped = torch.full((tokens, H), float("nan"), dtype=torch.bfloat16, device=dev)
    local_topk_sum(rows, ids, num_local_experts=n_local, expert_map=emap, out=shipped)
    ok = torch.equal(shipped, want) or (shipped.float() - want.float()).abs().max().item() <= 1e-2 * want.float().abs().max().item()
    chunks = H // 8
    outs, runs = {}, {}
    for name, (src, threads, per) in VARIANTS.items():
        out = torch.full((tokens, H), float("nan"), dtype=torch.bfloat16, device=dev)
        grid = (tokens,) if name == "old" else (tokens, -(-chunks // (threads * per)))
        args = (rows, ids, emap, out, i32(chunks), i32(8), i32(384 if emap is not None else 0), i32(n_local))
        launch = (lambda k=kernels[name], grid=grid, threads=threads, args=args: k.launch(grid, (threads,), args))
        launch(); torch.cuda.synchronize()
        outs[name] = torch.equal(out, shipped)
        gr = torch.cuda.CUDAGraph()
        with torch.cuda.graph(gr):
            for _ in range(20):
                launch()
        runs[name] = gr
    # the Triton stand-in of vLLM's moe_fused_mul_sum (positions = slot or -1, weights 1)
    try:
        from chord_bench import layer_kernels
        pos = torch.where(is_local, torch.arange(tokens * 8, device=dev, dtype=torch.int32), -1).to(torch.int32)
        tw = torch.ones(tokens, 8, device=dev)
        vout = torch.empty(tokens, H, dtype=torch.bfloat16, device=dev)
        rows0 = torch.where(is_local[:, None], rows, 0)
        layer_kernels.gather_mul_sum(rows0, pos, tw, vout); torch.cuda.synchronize()
        gr = torch.cuda.CUDAGraph()
        with torch.cuda.graph(gr):
            for _ in range(20):
                layer_kernels.gather_mul_sum(rows0, pos, tw, vout)
        runs["vllm_triton"] = gr
    except Exception as e:
        print("triton stand-in:", e)
    times = {name: [] for name in runs}
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(5):
        for name, gr in runs.items():
            gr.replay(); torch.cuda.synchronize()
            s.record(); gr.replay(); e.record(); torch.cuda.synchronize()
            times[name].append(s.elapsed_time(e) / 20 * 1000)
    med = {n: sorted(t)[len(t) // 2] for n, t in times.items()}
    results[label] = {"tokens": tokens, "shipped_ok": ok, "bit_equal": outs, "us": times, "median": med}
    print(f"{label:9s} tokens {tokens:5d} shipped_ok={ok} equal={all(outs.values())} " +
          " ".join(f"{n} {m:7.1f}" for n, m in med.items()), flush=True)
json.dump(results, open(os.path.join(os.environ.get("OUT", "."), "topk_ab.json"), "w"), indent=1)
