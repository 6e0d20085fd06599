"""Decode-kernel configuration: tile shape, pipeline depth and CTAs per SM from the GEMM shape.

Every choice here is host-side arithmetic on shapes only (no device reads), so dispatch never
synchronizes and is memoized per shape. docs/optimization.md records the measurements behind the
defaults.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

from chord_kernels.errors import ChordInputError
from chord_kernels.packed import PackedWeight

ATOM_BYTES = 288
SMEM_PER_SM = 233_472
"""Shared memory per SM on H200/B200 (228 KiB)."""
SMEM_RESERVED_PER_CTA = 1024
"""The driver reserves 1 KiB of shared memory per resident CTA."""
LIST_RESERVE = 4096
"""Shared bytes kept for the compacted routing-block list (1024 blocks) when sizing stages."""
BLOCK_MS = (8, 16, 24, 32, 48, 64)
SCHEDULES = ("strided", "dynamic", "balanced")
"""Work schedules, in the order of ``chord::indexed::Schedule`` (params.cuh)."""


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

    def __post_init__(self) -> None:
        if self.block_m not in BLOCK_MS:
            raise ChordInputError(f"block_m: expected one of {list(BLOCK_MS)}, got {self.block_m}")
        if self.bk % 256 or self.bk <= 0:
            raise ChordInputError(f"bk: expected a positive multiple of 256 (whole K tiles), got {self.bk}")
        if (self.warps * self.mt) % 4:
            raise ChordInputError(f"warps * mt: expected a multiple of 4 (whole 64-channel tiles), got {self}")
        if self.schedule not in SCHEDULES:
            raise ChordInputError(f"schedule: expected one of {list(SCHEDULES)}, got {self.schedule!r}")
        if self.stages < 2 or self.warps < 1 or self.mt < 1 or self.ctas_per_sm < 1:
            raise ChordInputError(f"invalid decode config {self}")

    @property
    def dynamic(self) -> bool:
        return self.schedule == "dynamic"

    @property
    def partial_floats(self) -> int:
        """fp32 values of one CTA's split-K partial (balanced schedule): BN x block_m."""
        return self.block_n * self.block_m

    @property
    def threads(self) -> int:
        return (self.warps + 1) * 32

    @property
    def block_n(self) -> int:
        return 16 * self.warps * self.mt

    @property
    def stage_bytes(self) -> int:
        weights = self.warps * self.mt * (self.bk // 32) * ATOM_BYTES
        acts = self.block_m * (self.bk * 2 + 16)
        return (weights + acts + 127) // 128 * 128

    def smem_bytes(self, list_cap: int) -> int:
        """Dynamic shared memory; mirrors ``DecodeConfig::smem_bytes`` in params.cuh."""
        header = (32 + 8 * self.block_m + 15) // 16 * 16
        header_offset = self.stages * self.stage_bytes + 16 * self.stages
        epilogue = self.warps * self.block_m * (self.mt * 32 + 16)
        return header_offset + self.stages * header + 64 + epilogue + 4 * list_cap

    def per_cta_budget(self) -> int:
        return SMEM_PER_SM // self.ctas_per_sm - SMEM_RESERVED_PER_CTA

    def template_args(self) -> str:
        schedule = SCHEDULES.index(self.schedule)
        return f"{self.warps}, {self.mt}, {self.block_m}, {self.bk}, {self.stages}, {schedule}"


def max_stages(block_m: int, *, warps: int = 4, mt: int = 1, bk: int = 256, ctas_per_sm: int = 4,
               limit: int = 8) -> int:
    """Deepest ring that fits ``ctas_per_sm`` CTAs per SM with room for the block list."""
    probe = DecodeConfig(block_m=block_m, warps=warps, mt=mt, bk=bk, stages=2, ctas_per_sm=ctas_per_sm)
    one = probe.smem_bytes(0) - DecodeConfig(block_m=block_m, warps=warps, mt=mt, bk=bk, stages=3,
                                             ctas_per_sm=ctas_per_sm).smem_bytes(0)
    per_stage, fixed = -one, probe.smem_bytes(0) + 2 * one
    budget = probe.per_cta_budget() - LIST_RESERVE
    return max(2, min(limit, (budget - fixed) // per_stage))


WGMMA_PROFILES = ("h200_ep8", "h200_tp8")
"""Profiles whose GPUs (sm_90a) run the WGMMA kernel; the Blackwell profiles keep the decode kernel."""
WGMMA_MIN_TOK_E = 9.0
"""Above this many rows per expert the WGMMA kernel beats the decode kernel (docs/optimization.md)."""
WIDE_BLOCKS = (128, 144, 160)
"""Token tiles for prefill (rows per expert above 64): the widest the WGMMA kernel runs well."""


def choose_block_m(weight: PackedWeight, num_slots: int) -> int:
    """Routing block size: the token tile that (almost) never splits an expert.

    ``num_slots`` counts the rows routed to ``weight``'s experts (for expert parallelism with
    global top-k ids, scale the slot count by local / global experts). Uniform routing puts a
    Poisson(tok_e) number of rows on an expert; an expert with more rows than ``block_m`` streams
    its weights once per block, so block_m is the smallest tile with a small overflow chance. Up
    to 9 rows per expert the decode kernel's 8- and 16-token blocks; above, on sm_90a, the WGMMA
    kernel's tiles (any multiple of 8): tok_e + 1.9 sigma, at least 32, up to 64 rows per expert,
    and beyond that the wide tile that pads the fewest rows (:func:`wide_block_m`).
    """
    if num_slots < 0:
        raise ChordInputError(f"num_slots: expected a non-negative count, got {num_slots}")
    tok_e = num_slots / max(1, weight.num_experts)
    if tok_e <= 3.5:
        return 8
    if tok_e <= WGMMA_MIN_TOK_E:
        return 16
    if weight.profile in WGMMA_PROFILES:
        if tok_e <= 64.0:
            return max(32, 8 * math.ceil((tok_e + 1.9 * math.sqrt(tok_e)) / 8))
        return wide_block_m(tok_e)
    if tok_e <= 17.0:
        return 24
    if 28.0 < tok_e <= 64.0 and weight.k >= 1024:
        return 64
    return 32


@functools.lru_cache(maxsize=1024)
def wide_block_m(tok_e: float) -> int:
    """The tile of :data:`WIDE_BLOCKS` with the fewest expected padded rows per expert when an
    expert receives Poisson(tok_e) rows (each expert is padded to whole tiles)."""
    def padded_rows(block: int) -> float:
        # E[ceil(X / block)] * block = block * sum_{j >= 0} P(X > j * block)
        lam, term, cdf, total = tok_e, math.exp(-tok_e), 0.0, 0.0
        x, j = 0, 0
        while j * block <= tok_e + 12 * math.sqrt(tok_e) + block:
            while x <= j * block:
                cdf += term
                x += 1
                term *= lam / x
            total += max(0.0, 1.0 - cdf)
            j += 1
        return block * total

    if tok_e > 600:  # exp(-tok_e) underflows; the padding is then nearly the same for every tile
        return WIDE_BLOCKS[0]
    return min(WIDE_BLOCKS, key=padded_rows)


@functools.lru_cache(maxsize=256)
def choose_config(n: int, k: int, block_m: int) -> DecodeConfig:
    """Default configuration for an indexed decode GEMM of ``N x K`` with ``block_m`` tokens.

    Measured on the H200 (docs/optimization.md, 2026-11-30): with 8-token blocks, the Kimi decode
    GEMMs (gate_up and EP8 down with K >= 1024, TP8 down with K = 256) stream best with 256-channel
    CTA tiles (four consumer warps of four 16-channel atoms each: fewer instructions per weight),
    256-wide K stages (37 KB of weights), two stages, two CTAs per SM, and the balanced schedule
    (equal K-stage ranges per CTA: at ~2.7 items per CTA whole items would leave a ragged last
    wave). Wider token blocks (16-32 tokens: 2-4 mma N tiles, more accumulators) take 128-channel
    tiles at two CTAs per SM: ep8_tok16 -12 % and tp8_1024 -14 % against the general configuration
    (interleaved timing, 2026-11-30); 48-64-token blocks take 192-channel tiles at one CTA per SM
    (K >= 1024) or eight one-atom warps (K = 256). Every other shape keeps the general
    configuration (64 x 256 stages, strided items). ``gemm`` may switch a balanced configuration
    to strided when the routing tensors hold many items per CTA (:func:`choose_schedule`).
    """
    if n >= 256 and block_m == 8 and (k >= 1024 or k == 256):
        return DecodeConfig(block_m=8, warps=4, mt=4, bk=256, stages=2, ctas_per_sm=2, schedule="balanced")
    if n >= 128 and 16 <= block_m <= 32 and (k >= 1024 or k == 256):
        stages = max_stages(block_m, warps=4, mt=2, bk=256, ctas_per_sm=2, limit=3)
        return DecodeConfig(block_m=block_m, warps=4, mt=2, bk=256, stages=stages, ctas_per_sm=2, schedule="balanced")
    if n >= 192 and block_m > 32 and k >= 1024:
        # 48-64 token rows (choose_block_m: 64 for 28 < tok_e <= 64): activations take as much
        # shared memory per stage as weights, so one CTA per SM; 192-channel tiles (4 warps x 3
        # atoms): one B fragment feeds three atoms, and the accumulators of 6-8 token tiles fit
        # (four atoms spill).
        stages = max_stages(block_m, warps=4, mt=3, bk=256, ctas_per_sm=1, limit=3)
        return DecodeConfig(block_m=block_m, warps=4, mt=3, bk=256, stages=stages, ctas_per_sm=1, schedule="balanced")
    if n >= 128 and block_m > 32 and k == 256:
        stages = max_stages(block_m, warps=8, mt=1, bk=256, ctas_per_sm=1, limit=3)
        return DecodeConfig(block_m=block_m, warps=8, mt=1, bk=256, stages=stages, ctas_per_sm=1, schedule="balanced")
    return general_config(block_m)


@functools.lru_cache(maxsize=16)
def general_config(block_m: int) -> DecodeConfig:
    """The shape-independent configuration (64 x 256 stages), also the fallback when a
    specialised one has no shared memory left for a long routing-block list."""
    # Several CTAs per SM keep ~50 KB of weights in flight per SM (Little's law at ~1.4 us);
    # wider token tiles need more shared memory per stage, so they run fewer CTAs.
    ctas = 4 if block_m <= 16 else 3 if block_m <= 32 else 2
    stages = max_stages(block_m, bk=256, ctas_per_sm=ctas)
    return DecodeConfig(block_m=block_m, bk=256, stages=stages, ctas_per_sm=ctas)


STRIDED_MIN_WAVES = 5.0
"""With at least this many work items per CTA (counted from the routing tensors' capacity), whole
items in a strided order beat the balanced split schedule: measured on the H200 2026-11-30 with
interleaved timing, EP8 down (~6.6 items per CTA by this count) 100.1 vs 106.0 us and TP8 down
(~52) 106.4 vs 107.6 us strided vs balanced, while the gate_up GEMMs (~3.8) are 2.5-5 % faster
balanced (docs/optimization.md)."""


def choose_schedule(config: DecodeConfig, max_items: int, num_sms: int) -> DecodeConfig:
    """The balanced configuration, or its strided twin when there are many items per CTA.

    ``max_items`` is the routing blocks the tensors can hold times the N tiles (no device read):
    an upper bound of the work, which is what the host knows without synchronizing."""
    if config.schedule != "balanced":
        return config
    if max_items >= STRIDED_MIN_WAVES * num_sms * config.ctas_per_sm:
        return dataclasses.replace(config, schedule="strided")
    return config


def grid_size(config: DecodeConfig, num_sms: int, max_items: int) -> int:
    """CTAs to launch: every SM filled, never more CTAs than possible work items."""
    return max(1, min(num_sms * config.ctas_per_sm, max_items))


def ntiles(n: int, config: DecodeConfig) -> int:
    return math.ceil(math.ceil(n / 16) / (config.warps * config.mt))
