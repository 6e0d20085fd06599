"""How the Triton kernels are launched: whether they can be, and with which configuration.

``KERNELS`` is :mod:`chord_tokenweave.kernels` where Triton imports (the ``gpu`` extra), else
None; CPU CI runs without it. :func:`kernel_config` decides the fused kernel's rows per loop
iteration, warps and pipeline stages, within the shared memory an H100/H200 CTA can have.
"""

from __future__ import annotations

from types import ModuleType

from chord_tokenweave.errors import TokenWeaveInputError

KERNELS: ModuleType | None
try:  # Triton is optional (the `gpu` extra); CPU CI runs without the kernels.
    from chord_tokenweave import kernels as KERNELS
except Exception:  # pragma: no cover - depends on the installation
    KERNELS = None

# 16 CTAs with the pipelined default configuration were within 2-10% of the best of a
# 4..64-CTA sweep at 1K-32K tokens (H200 TP2, hidden 8192; docs/tokenweave.md).
DEFAULT_NUM_CTAS = 16
SMEM_LIMIT = 220 * 1024  # H100/H200: 227 KB of shared memory per CTA at most


def triton_next_pow2(n: int) -> int:
    """Smallest power of two >= n (the kernels' row block)."""
    return 1 << max(0, (n - 1).bit_length())


def pipeline_smem(world_size: int, hidden: int, rows: int, stages: int) -> int:
    """Shared memory the pipelined row loop needs (W peer tiles + the residual per stage).

    Matches what Triton 3.6/3.9 allocate for this kernel: (stages - 1) buffered iterations.
    """
    return max(0, stages - 1) * rows * (world_size + 1) * triton_next_pow2(hidden) * 2


def default_config(world_size: int, hidden: int) -> tuple[int, int, int]:
    """``(rows_per_iter, num_warps, stages)`` for the fused kernel when none is given.

    For rows of >= 4096 elements: two rows per iteration, 16 warps, three pipeline stages (the
    fastest configuration of the H200 TP2 sweep at every size from 2K tokens: 409 us at 8K
    tokens with 16 CTAs, against 884 us for one row, 8 warps, no pipelining), falling back to
    fewer rows/stages where the shared memory would not fit (more ranks). Smaller rows: several
    rows per iteration, no pipelining (not measured).
    """
    block = triton_next_pow2(hidden)
    if block < 4096:
        return max(1, 4096 // block), 8 if block * max(1, 4096 // block) >= 4096 else 4, 1
    for rows, warps, stages in ((2, 16, 3), (1, 8, 3)):
        if pipeline_smem(world_size, hidden, rows, stages) <= SMEM_LIMIT:
            return rows, warps, stages
    return 2, 16, 1


def kernel_config(
    world_size: int,
    hidden: int,
    rows_per_iter: int | None = None,
    num_warps: int | None = None,
    stages: int | None = None,
) -> tuple[int, int, int]:
    """``(rows_per_iter, num_warps, stages)`` with the given ones kept and the rest defaulted.

    Warps default to :func:`default_config`'s when the rows are its rows, else to 8 for rows
    of >= 4096 elements per iteration and 4 below.
    """
    d_rows, d_warps, d_stages = default_config(world_size, hidden)
    rows = rows_per_iter or d_rows
    warps = num_warps or (
        d_warps if rows == d_rows else 8 if triton_next_pow2(hidden) * rows >= 4096 else 4
    )
    n_stages = stages or d_stages
    if rows <= 0 or warps not in (1, 2, 4, 8, 16, 32) or n_stages <= 0:
        raise TokenWeaveInputError(
            f"rows_per_iter must be > 0, num_warps a power of two <= 32 and stages > 0; "
            f"got {rows}, {warps}, {n_stages}"
        )
    return rows, warps, n_stages
