"""Session 20: where an eager launch's host time goes (µs per call, CUDA work negligible)."""
import cProfile
import ctypes
import io
import json
import os
import pstats
import time

import torch

from chord_kernels import routing
from chord_kernels.jit import driver, i32
from chord_kernels.ops import align

dev = torch.device("cuda", 0)
OUT = os.environ.get("OUT", "/tmp")
ids = torch.randint(0, 384, (16, 8), dtype=torch.int32, device=dev)
flat = ids.reshape(-1)
r = routing.align_block_size(ids, 16, 384)
o = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
kern = align.align_kernel("single", torch.int32)
args = (flat, None, *o, i32(128), i32(384), i32(16), i32(o[0].numel()), i32(o[1].numel()))
smem = 4 * (33 * 384 + 1)
fn = kern._function(dev)
stream = torch.cuda.current_stream(dev)
values = [ctypes.c_void_p(flat.data_ptr()), ctypes.c_void_p(0), *(ctypes.c_void_p(t.data_ptr()) for t in o),
          *(ctypes.c_int32(v) for v in (128, 384, 16, o[0].numel(), o[1].numel()))]
params = [ctypes.addressof(v) for v in values]
drv = driver._driver()
cu_stream = drv.CUstream(stream.cuda_stream)
pointers = (ctypes.c_void_p * len(params))(*params)


def per_call(fn, n=2000):
    fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / n * 1e6


steps = {
    "torch.empty(1)": lambda: torch.empty(1, device=dev),
    "torch.cuda.current_stream": lambda: torch.cuda.current_stream(dev),
    "CUstream(handle)": lambda: drv.CUstream(stream.cuda_stream),
    "cuLaunchKernel (all prebuilt)": lambda: drv.cuLaunchKernel(fn, 1, 1, 1, 1024, 1, 1, smem, cu_stream,
                                                                 ctypes.addressof(pointers), 0),
    "driver.launch": lambda: driver.launch(fn, (1, 1, 1), (1024, 1, 1), params, smem, stream),
    "CudaKernel.launch": lambda: kern.launch((1,), (1024,), args, smem=smem),
    "align.align_into": lambda: align.align_into(flat, None, 16, 384, *o),
    "routing.align_block_size": lambda: routing.align_block_size(ids, 16, 384),
}
from chord_kernels import formats, pack  # noqa: E402
from chord_kernels.indexed import gemm  # noqa: E402

w = pack("indexed", *(t.to(dev) for t in formats.random_quantized(8, 512, 7168)), profile="h200_tp8")
a = torch.randn(4, 7168, device=dev).bfloat16()
r8 = routing.align_block_size(torch.randint(0, 8, (4, 2), device=dev), 8, 8)
g_out = torch.empty(8, 512, dtype=torch.bfloat16, device=dev)
steps["indexed.gemm (M = 4, decode kernel)"] = lambda: gemm(a, w, r8.sorted_token_ids, r8.expert_ids,
                                                            r8.num_tokens_post_padded, block_m=8, top_k=2, out=g_out)
res = {k: per_call(f) for k, f in steps.items()}
for k, v in res.items():
    print(f"{k:<32} {v:7.2f} µs", flush=True)
prof = cProfile.Profile()
prof.enable()
for _ in range(2000):
    kern.launch((1,), (1024,), args, smem=smem)
prof.disable()
text = io.StringIO()
pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(20)
print("\n".join(text.getvalue().splitlines()[:35]))
json.dump(res, open(f"{OUT}/launch_cost.json", "w"), indent=1)
