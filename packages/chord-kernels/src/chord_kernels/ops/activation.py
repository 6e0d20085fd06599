"""SiLU-and-mul between the two MoE GEMMs.

Plain PyTorch for now (no fused kernel yet): it follows the numerics contract of
docs/formats.md exactly — ``silu(gate) * up`` computed in fp32 from the bf16 inputs, rounded
once to bf16 — and allocates an fp32 temporary of the input's size.
"""

from __future__ import annotations

import torch

from chord_kernels.checks import output_tensor, require_tensor
from chord_kernels.errors import ChordInputError


def silu_and_mul(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """bf16 ``[..., I]`` = ``silu(gate) * up`` of bf16 ``x = [..., 2I]`` (gate columns, then up).

    Any number of rows, zero included. ``out`` (bf16 ``[..., I]``, same device) receives the
    result when given.
    """
    require_tensor("x", x, dtype=torch.bfloat16, ndim=(1, 2, 3))
    if x.shape[-1] % 2:
        raise ChordInputError(f"x: expected an even last dimension [gate | up], got {x.shape[-1]}")
    shape = (*x.shape[:-1], x.shape[-1] // 2)
    out = output_tensor(out, shape, dtype=torch.bfloat16, device=x.device)
    gate, up = x.float().chunk(2, dim=-1)
    return out.copy_(torch.nn.functional.silu(gate).mul_(up))
