"""A TP rank's share of compressed-tensors expert weights, cut by hand (what the tests expect)."""

from __future__ import annotations

import torch


def tp_w13(packed: torch.Tensor, scales: torch.Tensor, rank: int, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank ``rank`` of ``size``: its gate rows and its up rows of ``[E, 2I, ...]``."""
    i = packed.shape[1] // 2
    part = i // size
    rows = torch.cat([torch.arange(rank * part, (rank + 1) * part), torch.arange(i + rank * part, i + (rank + 1) * part)])
    return packed[:, rows], scales[:, rows]


def tp_w2(packed: torch.Tensor, scales: torch.Tensor, rank: int, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank ``rank`` of ``size``: its input columns of ``[E, H, I/8]`` (and of the scales)."""
    part = packed.shape[2] * 8 // size
    return packed[..., rank * part // 8:(rank + 1) * part // 8], scales[..., rank * part // 32:(rank + 1) * part // 32]
