"""Measure the GPU's copy bandwidth and bf16 matrix rate at the start of a run.

Floors are computed against these measured numbers (the H200 host gave 4.27-4.28 TB/s copy and
679-788 TFLOP/s on a bf16 8192^3 GEMM on 2026-11-30), so a floor always refers to the machine the
implementations ran on.

Copy bandwidth must be measured with an SM kernel: a device-to-device ``copy_`` captured in a CUDA
graph becomes a memcpy node served by the copy engines, which on an H200 reached only 2.77 TB/s
(2026-11-30) while kernels stream at ~4.27 TB/s. The harness takes the best of a Triton copy
kernel, a PyTorch elementwise kernel and ``copy_``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from chord_bench.scenarios import Ceilings
from chord_bench.timing import bench

COPY_BLOCK = 8192
"""Elements per Triton program (16 KiB of bf16 in, 16 KiB out)."""


@functools.cache
def triton_copy_kernel():
    """A plain Triton copy kernel (None without Triton)."""
    try:
        import triton
        import triton.language as tl
    except Exception:  # no triton: the PyTorch kernels remain
        return None

    @triton.jit
    def _copy(src, dst, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)

    return _copy


def triton_copy(src: torch.Tensor, dst: torch.Tensor) -> None:
    """``dst[:] = src`` (contiguous, same size) with :func:`triton_copy_kernel`."""
    kernel = triton_copy_kernel()
    if kernel is None:
        raise RuntimeError("triton is not importable")
    n = src.numel()
    kernel[(-(-n // COPY_BLOCK),)](src, dst, n, BLOCK=COPY_BLOCK, num_warps=8)


def copy_methods(src: torch.Tensor, dst: torch.Tensor) -> dict[str, Callable[[], object]]:
    """Ways to copy ``src`` into ``dst``; the fastest defines the copy bandwidth."""
    return {
        "triton copy kernel": lambda: triton_copy(src, dst),
        "torch elementwise (mul by 1)": lambda: torch.mul(src, 1.0, out=dst),
        "torch copy_": lambda: dst.copy_(src),
    }


def copy_bandwidth_tbps(nbytes: int = 2 << 30, device: torch.device | str = "cuda") -> tuple[float, str]:
    """Best device copy of ``nbytes`` per tensor, counting read + write (TB/s), and its method."""
    n = nbytes // 2
    src = torch.randn(n, device=device).to(torch.bfloat16)
    dst = torch.empty_like(src)
    best, how = 0.0, "none"
    for name, fn in copy_methods(src, dst).items():
        try:
            t = bench(fn, rep_ms=50.0)
        except Exception:  # one method failing (no triton, capture issue) leaves the others
            continue
        tbps = 2 * n * 2 / (t.us * 1e-6) / 1e12
        if tbps > best:
            best, how = tbps, name
    if best == 0.0:
        raise RuntimeError("no copy method could be timed")
    return best, how


def bf16_matmul_tflops(size: int = 8192, device: torch.device | str = "cuda") -> float:
    """bf16 ``size^3`` matmul rate (TFLOP/s)."""
    a = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    b = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    out = torch.empty_like(a)
    t = bench(lambda: torch.mm(a, b, out=out), rep_ms=100.0)
    return 2 * size**3 / (t.us * 1e-6) / 1e12


def measure(device: torch.device | str = "cuda") -> Ceilings:
    """Both ceilings, measured now on ``device``."""
    bw, how = copy_bandwidth_tbps(device=device)
    rate = bf16_matmul_tflops(device=device)
    name = torch.cuda.get_device_name(torch.device(device))
    torch.cuda.empty_cache()
    return Ceilings(round(bw, 3), round(rate, 1), f"measured at run start on {name} (copy: {how})")
