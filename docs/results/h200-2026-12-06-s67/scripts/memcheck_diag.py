# ruff: noqa
"""Session 67: one configuration (SHAPE="experts,N,K,rows,top_k" to change the launch) of sanitize_pair.py per process (argv: name [unpaired]) under memcheck, with the
addresses of the tensors it passes (to place a reported access)."""
import dataclasses, sys

import torch

import chord_kernels
from chord_kernels import reference
from chord_kernels.formats import random_quantized
from chord_kernels.indexed import gemm
from chord_kernels.routing import align_block_size

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from sanitize_pair import CONFIGS

name = sys.argv[1]
unpaired = len(sys.argv) > 2
silu = "silu" in sys.argv[2:] or len(sys.argv) <= 2
dev = torch.device("cuda")
g = torch.Generator(device=dev).manual_seed(67)
import os
e, n, k, rows, top_k = (int(x) for x in os.environ.get("SHAPE", "6,1856,800,150,2").split(","))
packed, scales = random_quantized(e, n, k, generator=g, device=dev)
pw = chord_kernels.pack("indexed", packed, scales, profile="h200_ep8")
ids = torch.rand(rows, e, generator=g, device=dev).argsort(dim=1)[:, :top_k]
ids[: rows // 2, 0] = 1
a = torch.randn(rows, k, generator=g, device=dev).to(torch.bfloat16)
_, block_m, config = next(c for c in CONFIGS if c[0] == name)
if unpaired:
    config = dataclasses.replace(config, cta_pair=False)
r = align_block_size(ids, block_m, e)
for tname, t in vars(pw).items() if hasattr(pw, "__dict__") else []:
    if isinstance(t, torch.Tensor):
        print(f"pw.{tname}: {t.data_ptr():#x} .. {t.data_ptr() + t.numel() * t.element_size():#x} ({t.numel() * t.element_size()} B, {t.dtype}, {tuple(t.shape)})")
for tname, t in (("a", a), ("sorted", r.sorted_token_ids), ("expert_ids", r.expert_ids), ("packed", packed), ("scales", scales)):
    print(f"{tname}: {t.data_ptr():#x} .. {t.data_ptr() + t.numel() * t.element_size():#x}")
print(config, flush=True)
out = torch.full((rows * top_k, n), float("nan"), dtype=torch.bfloat16, device=dev)
print(f"out: {out.data_ptr():#x}", flush=True)
gemm(a, pw, r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded, block_m=block_m, top_k=top_k, out=out,
     config=config)
torch.cuda.synchronize()
print("ok", flush=True)
