"""GPU dequantization of compressed-tensors int4 weights, bit-exact with the reference."""

from __future__ import annotations

import functools

import torch

from chord_kernels import hardware
from chord_kernels.checks import output_tensor, require_tensor
from chord_kernels.formats import GROUP_SIZE, check_quantized
from chord_kernels.jit import DEFAULT_ARCH, CudaKernel, i64

_THREADS = 256

_SOURCE = r"""
#include "chord/ops/dequant_int4.cuh"

extern "C" __global__ void __launch_bounds__(256) chord_dequant_int4(
    const uint4* __restrict__ packed, const uint16_t* __restrict__ scales, uint4* __restrict__ out,
    int64_t num_groups) {
  chord::dequant_int4_groups(packed, scales, out, num_groups);
}
"""


@functools.cache
def _kernel() -> CudaKernel:
    return CudaKernel(name="dequant_int4", source=_SOURCE, entry="chord_dequant_int4")


def kernels(arch: str = DEFAULT_ARCH) -> list[CudaKernel]:
    """The op's precompile hook (:mod:`chord_kernels.families`): one kernel for every ``arch``."""
    return [_kernel()]


def dequantize_gpu(
    packed: torch.Tensor, scales: torch.Tensor, out: torch.Tensor | None = None
) -> torch.Tensor:
    """bf16 ``[..., N, K]`` from int32 ``[..., N, K/8]`` + bf16 ``[..., N, K/32]`` on a CUDA device.

    Bit-identical to :func:`chord_kernels.formats.dequantize`. Inputs must be contiguous.
    """
    _, k = check_quantized(packed, scales)
    require_tensor("packed", packed, device="cuda", contiguous=True)
    require_tensor("scales", scales, contiguous=True)
    shape = (*packed.shape[:-1], k)
    out = output_tensor(out, shape, dtype=torch.bfloat16, device=packed.device, contiguous=True)
    num_groups = packed.numel() * 8 // GROUP_SIZE
    if num_groups == 0:
        return out
    sms = hardware.num_sms(hardware.device_index(packed.device))
    blocks = min((num_groups + _THREADS - 1) // _THREADS, sms * 8)
    _kernel().launch((blocks,), (_THREADS,), (packed, scales, out, i64(num_groups)))
    return out
