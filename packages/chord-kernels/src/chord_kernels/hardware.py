"""Facts about the GPU that launch planning needs, kept in one place.

Shared-memory sizes are those of every architecture Chord builds for (sm_90a, sm_100a, sm_103a);
the SM count and the architecture are read from the device (memoized per device index), never
assumed.
"""

from __future__ import annotations

import functools

import torch

from chord_kernels.errors import ChordInputError, ChordUnsupportedError
from chord_kernels.jit.nvcc import arch_of_capability

SMEM_PER_SM = 233_472
"""Shared memory per SM on H100/H200 and B200/B300 (228 KiB)."""
SMEM_RESERVED_PER_CTA = 1024
"""The driver reserves 1 KiB of shared memory per resident CTA."""


def cuda_device(device: torch.device | str | int | None = None) -> torch.device:
    """A CUDA device with its index (default: the current device)."""
    dev = torch.device("cuda", device) if isinstance(device, int) else torch.device(device or "cuda")
    if dev.type != "cuda":
        raise ChordInputError(f"device: expected a CUDA device, got {dev}")
    if not torch.cuda.is_available():
        raise ChordUnsupportedError(
            f"device: {dev} asked for, but torch sees no CUDA GPU (torch.cuda.is_available() is False; torch "
            f"{torch.__version__}, CUDA {torch.version.cuda}); Chord's kernels need an H100/H200 or B200/B300"
        )
    return dev if dev.index is not None else torch.device("cuda", torch.cuda.current_device())


def device_index(device: torch.device) -> int:
    """The CUDA device index (the current device when ``device`` has none)."""
    return device.index if device.index is not None else torch.cuda.current_device()


@functools.cache
def num_sms(index: int) -> int:
    """Streaming multiprocessors of CUDA device ``index``."""
    return torch.cuda.get_device_properties(index).multi_processor_count


@functools.cache
def arch(index: int) -> str:
    """The Chord architecture (``sm_90a``, ...) of CUDA device ``index``; unsupported GPUs raise."""
    return arch_of_capability(*torch.cuda.get_device_capability(index))
