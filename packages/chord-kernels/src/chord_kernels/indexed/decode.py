"""The indexed decode kernel (mma.sync, ``include/chord/indexed/decode.cuh``): its configuration
and its generated source.

:class:`DecodeConfig` is emitted into the source as the template arguments of
``chord::indexed::DecodeConfig``; the host's shared-memory size, thread count and split-K
partial size for it are emitted as ``static_assert``\\ s, so a host formula that drifts from the
device layout fails to compile instead of launching a kernel with the wrong shared memory.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from chord_kernels.errors import ChordInputError
from chord_kernels.hardware import SMEM_PER_SM, SMEM_RESERVED_PER_CTA
from chord_kernels.indexed.args import ARGS, prelude
from chord_kernels.indexed.layout import ATOM_BYTES, ATOM_K, ATOM_N, TILE_GROUPS, TILE_ROWS
from chord_kernels.indexed.workspace import WorkspaceLayout
from chord_kernels.jit import CudaKernel

BLOCK_MS = (8, 16, 24, 32, 48, 64)
"""Routing block sizes (tokens per block) the decode kernel is built for."""
SCHEDULES = {"strided": "kStrided", "dynamic": "kDynamicCounter", "balanced": "kBalanced"}
"""Work schedules and their ``chord::indexed::Schedule`` enumerators (decode_config.cuh)."""
ENTRY = "chord_indexed_decode"
LIST_CAP_LIMIT = 8192
"""Largest routing-block count compacted in shared memory; beyond it the kernel walks all blocks."""


@dataclass(frozen=True)
class DecodeConfig:
    """One instantiation of ``chord::indexed::DecodeConfig`` plus its launch shape."""

    block_m: int
    warps: int = 4
    mt: int = 1
    """16-channel atoms per consumer warp; the CTA's N tile is ``16 * warps * mt``."""
    bk: int = 256
    stages: int = 3
    ctas_per_sm: int = 4
    schedule: str = "strided"
    """``strided`` (CTA c takes items c, c + G, ...), ``dynamic`` (global atomic counter) or
    ``balanced`` (equal contiguous ranges of K stages, items split along K; scheduler.cuh)."""
    subnormal: bool = False
    """Dequantize with one fma per pair of weights (``PackedWeight.small_scales`` weights only; the
    planner sets it from the weight)."""
    row_widths: bool = False
    """Multiply only an item's token tiles up to its last real row (16-64-token blocks)."""
    silu_mul: bool = False
    """Fused SiLU-and-mul: the weight is ``[gate | up]`` (N = 2I) and the output ``silu(gate) * up``
    (``[slots, I]``); the first half of the warps take gate channels, the second half the same
    channels of up (:meth:`fits_silu_mul`; not with the balanced schedule, which splits items)."""

    def __post_init__(self) -> None:
        if self.block_m not in BLOCK_MS:
            raise ChordInputError(f"block_m: expected one of {list(BLOCK_MS)}, got {self.block_m}")
        tile_k = ATOM_K * TILE_GROUPS
        if self.bk % tile_k or self.bk <= 0:
            raise ChordInputError(f"bk: expected a positive multiple of {tile_k} (whole K tiles), got {self.bk}")
        if (self.warps * self.mt) % TILE_ROWS:
            raise ChordInputError(
                f"warps * mt: expected a multiple of {TILE_ROWS} (whole {ATOM_N * TILE_ROWS}-channel tiles), got {self}"
            )
        if self.schedule not in SCHEDULES:
            raise ChordInputError(f"schedule: expected one of {list(SCHEDULES)}, got {self.schedule!r}")
        if self.row_widths and self.block_m == 8:
            raise ChordInputError("row_widths: expected a block of 16 tokens or more (8-token blocks are one token tile)")
        if self.silu_mul and (self.schedule == "balanced" or self.warps % 2 or (self.warps * self.mt // 2) % TILE_ROWS):
            raise ChordInputError(f"silu_mul: expected the strided or dynamic schedule and an even number of warps "
                                  f"holding whole {ATOM_N * TILE_ROWS}-channel tiles of gate and of up, got {self}")
        if self.stages < 2 or self.warps < 1 or self.mt < 1 or self.ctas_per_sm < 1:
            raise ChordInputError(f"invalid decode config {self}")

    @property
    def dynamic(self) -> bool:
        return self.schedule == "dynamic"

    @property
    def threads(self) -> int:
        """Consumer warps plus one producer warp."""
        return (self.warps + 1) * 32

    @property
    def block_n(self) -> int:
        return ATOM_N * self.warps * self.mt

    @property
    def partial_floats(self) -> int:
        """fp32 values of one CTA's split-K partial (balanced schedule): BN x block_m."""
        return self.block_n * self.block_m

    @property
    def stage_bytes(self) -> int:
        weights = self.warps * self.mt * (self.bk // ATOM_K) * ATOM_BYTES
        acts = self.block_m * (self.bk * 2 + 16)
        return (weights + acts + 127) // 128 * 128

    def smem_bytes(self, list_cap: int) -> int:
        """Dynamic shared memory with room for ``list_cap`` compacted routing blocks (checked
        against ``DecodeConfig::smem_bytes`` of decode_config.cuh when the kernel compiles)."""
        header = (32 + 8 * self.block_m + 15) // 16 * 16
        header_offset = self.stages * self.stage_bytes + 16 * self.stages
        epilogue = self.warps * self.block_m * (self.mt * 32 + 16)
        return header_offset + self.stages * header + 64 + epilogue + 4 * list_cap

    cluster = 1
    """CTAs per thread-block cluster (none: one)."""

    def per_cta_budget(self) -> int:
        """Shared memory one CTA may use so that ``ctas_per_sm`` of them fit on an SM."""
        return SMEM_PER_SM // self.ctas_per_sm - SMEM_RESERVED_PER_CTA

    def fits_silu_mul(self, n: int) -> bool:
        """Whether SiLU-and-mul can be fused for a ``[gate | up]`` weight of ``n`` rows: each N tile
        holds half of its channels from gate and half from up, so I = n / 2 must be a multiple of
        half the tile; and the balanced schedule, whose split items end in different CTAs, cannot."""
        half = self.warps * self.mt // 2
        return (self.schedule != "balanced" and self.warps % 2 == 0 and half % TILE_ROWS == 0
                and n % self.block_n == 0 and n >= self.block_n)

    def ntiles(self, n: int) -> int:
        """N tiles of a GEMM with ``n`` output channels (work items per routing block)."""
        return math.ceil(math.ceil(n / ATOM_N) / (self.warps * self.mt))

    def workspace(self, grid: int) -> WorkspaceLayout:
        """What a launch of ``grid`` CTAs needs: the dynamic schedule's two counters, or the
        balanced schedule's arrival counter per (CTA, warp) and two partial slots per (CTA, warp)."""
        if self.schedule == "dynamic":
            return WorkspaceLayout(counters=2)
        if self.schedule == "balanced":
            return WorkspaceLayout(flags=grid * self.warps, partials=2 * grid * self.partial_floats)
        return WorkspaceLayout()

    def template_args(self) -> str:
        schedule = f"chord::indexed::{SCHEDULES[self.schedule]}"
        flags = (self.subnormal, self.row_widths, self.silu_mul)
        while flags and not flags[-1]:  # the template's defaults
            flags = flags[:-1]
        sub = "".join(f", {str(f).lower()}" for f in flags)
        return f"{self.warps}, {self.mt}, {self.block_m}, {self.bk}, {self.stages}, {schedule}{sub}"

    def source(self) -> str:
        """The complete translation unit of this configuration."""
        entry = ARGS.entry(ENTRY, f"Cfg::kThreads, {self.ctas_per_sm}", "chord::indexed::decode_kernel<Cfg>(args);")
        return _SOURCE.format(
            prelude=prelude(), template_args=self.template_args(), threads=self.threads,
            smem0=self.smem_bytes(0), smem1=self.smem_bytes(1), warp_partial=self.partial_floats // self.warps,
        ) + entry

    def kernel(self) -> CudaKernel:
        """The JIT kernel (compiled on first launch or :meth:`CudaKernel.compile`)."""
        return decode_kernel(self)


_SOURCE = r"""{prelude}
#include "chord/indexed/decode.cuh"

using Cfg = chord::indexed::DecodeConfig<{template_args}>;
static_assert(Cfg::kThreads == {threads}, "host and device thread counts differ");
static_assert(Cfg::smem_bytes(0) == {smem0} && Cfg::smem_bytes(1) == {smem1},
              "host and device shared-memory plans differ (chord_kernels/indexed/decode.py smem_bytes)");
static_assert(Cfg::kPartialFloats == {warp_partial}, "host and device split-K partial sizes differ");

"""


@functools.cache
def decode_kernel(config: DecodeConfig) -> CudaKernel:
    """The cached JIT kernel of ``config`` (one per configuration per process)."""
    return CudaKernel(name="indexed_decode", source=config.source(), entry=ENTRY)
