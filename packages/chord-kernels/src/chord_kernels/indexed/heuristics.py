"""Shape rules of the indexed GEMMs: the routing block size and the decode kernel's configuration.

Every rule is host-side arithmetic on shapes (no device reads), so planning never synchronizes
and is memoized. The comments say why a rule has its shape; the measurements that set its
thresholds are in docs/optimization.md ("Heuristics and their evidence").
"""

from __future__ import annotations

import dataclasses
import functools
import math

from chord_kernels.errors import ChordInputError
from chord_kernels.indexed.decode import BLOCK_MS, DecodeConfig
from chord_kernels.packed import PackedWeight

__all__ = [
    "BLOCK_MS",
    "DYNAMIC_MIN_K",
    "LIST_RESERVE",
    "MANY_EXPERTS",
    "NARROW_MANY_MAX_TOK_E",
    "NARROW_MAX_TOK_E",
    "PREFILL_BLOCK",
    "STRIDED_MIN_WAVES",
    "TWO_ITEM_BLOCKS",
    "TWO_ITEM_MAX_TOK_E",
    "WGMMA_BLOCK_MS",
    "WGMMA_PROFILES",
    "WIDE16_BLOCK",
    "WIDE16_MAX_TOK_E",
    "WIDE_BLOCK",
    "DecodeConfig",
    "block_ms_for",
    "choose_block_m",
    "choose_config",
    "choose_schedule",
    "general_config",
    "max_stages",
    "short_k_config",
]

LIST_RESERVE = 4096
"""Shared bytes kept for the compacted routing-block list (1024 blocks) when sizing stages."""
STRIDED_MIN_WAVES = 5.0
"""Work items per CTA (counted from the routing tensors' capacity) from which whole items in a
strided order beat the balanced split schedule: with many items per CTA the ragged last wave that
balancing removes is small, and whole items need no split-K partials."""


def max_stages(block_m: int, *, warps: int = 4, mt: int = 1, bk: int = 256, ctas_per_sm: int = 4,
               limit: int = 8) -> int:
    """Deepest ring that fits ``ctas_per_sm`` CTAs per SM with room for the block list."""
    def config(stages: int) -> DecodeConfig:
        return DecodeConfig(block_m=block_m, warps=warps, mt=mt, bk=bk, stages=stages, ctas_per_sm=ctas_per_sm)

    two = config(2)
    per_stage = config(3).smem_bytes(0) - two.smem_bytes(0)
    fixed = two.smem_bytes(0) - 2 * per_stage
    budget = two.per_cta_budget() - LIST_RESERVE
    return max(2, min(limit, (budget - fixed) // per_stage))


WGMMA_PROFILES = ("h200_ep8", "h200_tp8")
"""Profiles whose GPUs (sm_90a) run the WGMMA kernel; the Blackwell profiles keep the decode kernel."""
WGMMA_MIN_TOK_E = 9.0
"""Above this many rows per expert the WGMMA kernel's tiles of 24 tokens and more (docs/optimization.md)."""
WIDE_BLOCK = 24
"""Routing block from :data:`WIDE_MIN_TOK_E` to :data:`WIDE_FEW_MAX_TOK_E` rows per expert: the WGMMA
kernel takes up to seven consecutive blocks of an expert per work item (168 tokens on 128-wide K
stages, the weights in their own ring), so nearly every expert is one weight pass (a weight pass
costs more than its MMAs; docs/optimization.md, sessions 6-7); the MMA width follows its rows in
steps of the compiled widths (:data:`~chord_kernels.indexed.wgmma.WIDE_SEVEN_WIDTHS`; the down
GEMMs up to :data:`~chord_kernels.indexed.wgmma.WIDE_SEVEN_MIN_TOK_E` rows per expert take up to
six blocks, :data:`~chord_kernels.indexed.wgmma.WIDE_SHORT_K`; sessions 14 and 16). Also the
smallest tile, for 9 to :data:`NARROW_MAX_TOK_E` rows per expert, one block per work item (two for
gate_up) on 256-wide K stages: :func:`~chord_kernels.indexed.wgmma.choose_wgmma_config` tells the two
apart by the expected rows per expert."""
NARROW_MAX_TOK_E = 16.0
"""Up to here the WGMMA kernel's routing block is :data:`WIDE_BLOCK`: a 24-token wgmma costs a
16-token one, and gate_up takes an expert's first two blocks as one item
(:data:`~chord_kernels.indexed.wgmma.FOUR_CONSUMER_NARROW_ITEMS`), so an expert past 24 rows costs
it no second weight pass; the down's one-block items have room in their last wave for three such
experts of EP8's 48. The layer measured 5-7 % faster than at 32 under EP8 and DeepEP low latency at
10-16 rows per expert (0-4 % in two DeepEP draws at 14), level at 17, 2 % slower at 18 (four experts
past 24 rows: a twelfth wave of the down); with one-block gate_up items two experts past 24 rows cost
the layer 15-18 % (docs/optimization.md, sessions 18 and 26)."""
NARROW_MANY_MAX_TOK_E = 17.0
""":data:`NARROW_MAX_TOK_E` for weights of at least :data:`MANY_EXPERTS` experts: TP8's layer (384
experts) measured 6-10 % faster with 24- than with 32-token blocks at 10-16 rows per expert, 4-5 % at
17, 1-3 % at 18 (docs/optimization.md, sessions 19 and 26)."""
MANY_EXPERTS = 256
"""Local experts from which :data:`NARROW_MANY_MAX_TOK_E` and :data:`MANY_32_MAX_TOK_E` apply
(measured at 384; EP8's 48 keep :data:`NARROW_MAX_TOK_E` and the tok_e + 1.9 sigma tiles)."""
MANY_32_MAX_TOK_E = 24.0
"""With :data:`MANY_EXPERTS` experts, 32-token blocks up to here, where tok_e + 1.9 sigma gives 40
(from 22.8 rows per expert): among ~400 blocks an expert past 32 rows costs one more, and the
32-token items cost less than 40-token ones. TP8's layer measured 5 % faster than with 40 at 24 rows
per expert (1152 tokens, two draws), and 1.6-3.9 % slower at 24.5-26 (20 draws), once 40-token blocks
ran 32-token wgmmas on both GEMMs (row widths; docs/optimization.md, session 38; before them 32
measured faster to 26 rows, session 34); EP8's 48 experts lose with 32 from 24 rows on."""
WIDE_MIN_TOK_E = 120.0
"""Up to here (from 86.6 rows per expert, :data:`PREFILL_ONE_BLOCK_MAX`) :data:`PREFILL_BLOCK`'s
128-token items: most experts fit one, and their 256-wide K stages cost less than the wide items'
128-wide ones. Measured 2-9 % faster per layer than the wide items at 72-118 rows per expert on
EP8's and TP8's shapes, 5-12 % slower at 128 and 149 (docs/optimization.md, session 11)."""
WIDE_MAX_TOK_E = 150.0
"""tok_e + 1.5 sigma fits the 168-token item up to here; beyond, most experts would need two (the grouped
contiguous mode's wide items end here)."""
WIDE_FEW_MAX_TOK_E = 155.0
"""The wide items' last rows per expert in the indexed routing with fewer than :data:`MANY_EXPERTS` experts (EP8's
48). EP8's layer on them against :data:`TWO_ITEM_BLOCKS`' 96, the same bits (docs/optimization.md, sessions 68 and
69): 2-8 % faster at 152, 1-5 % at 150-155; at 156 96 is level to 4 % faster (both sessions), 8-10 % at 160."""
WIDE_MANY_MAX_TOK_E = 145.0
""":data:`WIDE_MAX_TOK_E` for weights of at least :data:`MANY_EXPERTS` experts; beyond, up to
:data:`MANY_88_MAX_TOK_E`, 88-token blocks, one per work item (their gate_up items prefetch the next stage's rows
since sessions 67 and 68). TP8's layer against the wide items, the same bits (docs/optimization.md, session 68):
4 % slower at 140.6 and 143.8 rows per expert, 2-3 % faster at 146.9, 3-5 % at 150, 6 % at 154, 10 % at 158; EP8's 48
experts keep the wide items to :data:`WIDE_FEW_MAX_TOK_E` (88- and 96-token blocks 6-15 % slower at 145-148)."""
MANY_88_BLOCK = 88
"""The routing block beyond :data:`WIDE_MANY_MAX_TOK_E` rows per expert (with :data:`MANY_EXPERTS` experts), one per
work item, to :data:`MANY_88_MAX_TOK_E`."""
MANY_88_MAX_TOK_E = 160.0
"""The last rows per expert of :data:`MANY_88_BLOCK`'s 88-token blocks: TP8's layer measured them 1-2 % faster
than :data:`TWO_ITEM_BLOCKS`' 96 at 146.9-158.3 rows per expert, 2-3 % slower at 162.5 and 9-10 % at 170.7
(docs/optimization.md, session 68)."""
WIDE16_BLOCK = 16
"""Routing block from :data:`WIDE_MIN_TOK_E` to :data:`WIDE16_MAX_TOK_E` rows per expert for fewer than
:data:`MANY_EXPERTS` experts (EP8's 48): up to ten blocks of an expert per work item, the K loop
compiled at 128, 144 and 160 tokens (:func:`~chord_kernels.indexed.wgmma.wide16_config`, the grouped
contiguous mode's wide items with the rows gathered), so that an expert of up to 128 rows computes 128
where the 24-token items compute 144. Interleaved against them on Kimi's EP8 GEMMs, the same bits
(docs/optimization.md, session 65): gate_up with SiLU fused 0.3-1.8 % faster at 121-136 rows per
expert, the down from routing-order rows 1.4-8 % faster; level at 140, 4 % slower at 144-149."""
WIDE16_MAX_TOK_E = 136.0
"""The last rows per expert of :data:`WIDE16_BLOCK` (measured at 121, 124, 128, 132, 136, 140, 144, 149)."""
TWO_ITEM_BLOCKS = ((176.0, 96), (192.0, 104))
"""Routing blocks beyond the wide items' rows per expert, as (up to this tok_e, block): one
block per work item (256-wide K stages, the K loop also compiled 8 tokens narrower, and 16 where
K > 256), so that an expert of 151-208 rows is two items of about half its rows instead of
:data:`PREFILL_BLOCK`'s 128 and a rest: the smallest block with tok_e + 1.2 sigma <= two blocks.
Against 64 x 2 items the layer measured 7-8 % faster at 160-171 rows per expert with 96 (TP8 and
EP8), 4 % at 176; with 104 3-6 % at 180-192 (where 96 was 2 % faster to 3 % slower), 1-3 % slower at
200 and 10-12 % at 213; one-block items of 112 and 120 tokens lose from 200-213 rows per expert on
(docs/optimization.md, sessions 22 and 23). Against the 64 x 2 items committing per K group (session 61) the
layer still measured 2-10 % faster at 160-181 rows per expert, level to 6 % at 185-192 (session 62)."""
TWO_ITEM_MAX_TOK_E = TWO_ITEM_BLOCKS[-1][0]
PREFILL_BLOCK = 64
"""Routing block from 86.6 rows per expert (where the tok_e + 1.9 sigma tile passes
:data:`PREFILL_ONE_BLOCK_MAX`) to :data:`WIDE_MIN_TOK_E` and beyond :data:`TWO_ITEM_MAX_TOK_E`
rows per expert: two consecutive blocks of an expert per work item (128 tokens on 256-wide K
stages, whose two stages of wider items would not fit shared memory), and the grouped contiguous
mode's block (whole 64-row halves of its segments). At 64 rows per expert a single 80-row tile
measured faster: most experts fit it, and 64-row steps waste MMAs on the many with 65-80 rows."""
PREFILL_ONE_BLOCK_MAX = 104
"""Beyond 64 rows per expert the tok_e + 1.9 sigma tile stays the block, one per work item, while it
is at most this many tokens (to 86.6 rows per expert; :data:`PREFILL_BLOCK`'s items of two beyond):
most experts fit one 88-104-token item, where the 128-token items run most experts at a 64-token
width with two stages and per-step commits. The layer measured 6-11 % faster with 96-token blocks at
72 rows per expert and 3-10 % with 104 at 85 (EP8 and TP8, two draws each); the 120-token tile at 100
rows only 1-2 % (docs/optimization.md, session 34)."""
MANY_104_MAX_TOK_E = 93.0
"""With :data:`MANY_EXPERTS` experts :data:`PREFILL_ONE_BLOCK_MAX`'s one-block items stay the block from 86.6 to
here, where the tok_e + 1.9 sigma tile passes it (their gate_up items prefetch the next stage's rows since session
67): TP8's layer against :data:`PREFILL_BLOCK`'s 64 x 2 items, the same bits (docs/optimization.md, session 68),
5-10 % faster at 87 and 87.5 rows per expert, 3-4 % at 90 and 92, level at 94 and 96. EP8's 48 experts gained at
most 3 % at 87-90 and lost 1-4 % from 92, so they keep the tile's rule."""
PREFILL_BLOCK_STAND_IN = 56
"""The tile where tok_e + 1.9 sigma comes out at :data:`PREFILL_BLOCK` (about 44-51 rows per expert):
64-token blocks are the prefill items of two blocks, whose 128-token K loop and two stages cost an
expert of one block more than the 56-token one-block items with three stages. The layer measured
3-18 % faster with 56-token blocks in 27 of 30 draws at 44-50 rows per expert (EP8, TP8 at 2112-2304
tokens, DeepEP low-latency buffers; the same bits), though up to a fifth of the experts then take a
second block; up to 11 % slower in three draws at 50, where 10-14 of 48 experts passed 56 rows
(72-token blocks: 1-9 % faster than 64; docs/optimization.md, session 34)."""

DYNAMIC_MIN_K = 2048
"""From this K on, the WGMMA kernel takes its items from a global counter (``WgmmaConfig.dynamic``):
a CTA's items then cost the same on average whatever their order. The strided order gave TP8's
gate_up (an expert's 128- and 64-token items, two N tiles each: a cost period dividing the grid)
some CTAs only the expensive items, 23 % of SM time idle (ncu; 8 % with the counter); the counter
measured 5-13 % faster there in three runs and about even elsewhere (EP8's GEMMs -7 to +7 %).
Below (TP8's down, K = 256: one stage per item) fetching an item costs more than the balance
gains (docs/optimization.md, session 9)."""


def choose_block_m(weight: PackedWeight, num_slots: int) -> int:
    """Routing block size: the token tile that (almost) never splits an expert.

    ``num_slots`` counts the rows routed to ``weight``'s experts (for expert parallelism with
    global top-k ids, scale the slot count by local / global experts). Uniform routing puts a
    Poisson(tok_e) number of rows on an expert; an expert with more rows than ``block_m`` streams
    its weights once per block, so block_m is the smallest tile with a small overflow chance. Up
    to 9 rows per expert the decode kernel's 8- and 16-token blocks (16-token blocks run on the
    WGMMA kernel from K = 2048 on sm_90a, ``planner.WGMMA_BLOCK16_MIN_K``, except wide N below K = 4096,
    ``planner.WIDE_BLOCK16_MAX_K``); above, on sm_90a, the WGMMA
    kernel's tiles (any multiple of 8): 24 up to :data:`NARROW_MAX_TOK_E` (:data:`NARROW_MANY_MAX_TOK_E`
    from :data:`MANY_EXPERTS` experts), then tok_e + 1.9 sigma (at least 32, and 32 up to
    :data:`MANY_32_MAX_TOK_E` from :data:`MANY_EXPERTS` experts; where it is :data:`PREFILL_BLOCK`,
    :data:`PREFILL_BLOCK_STAND_IN`) up to 64 rows per expert, and on while it is at most
    :data:`PREFILL_ONE_BLOCK_MAX` (to :data:`MANY_104_MAX_TOK_E` with many experts); beyond,
    :data:`PREFILL_BLOCK` (two per work item), except :data:`WIDE_BLOCK` (up to seven per work item)
    from :data:`WIDE_MIN_TOK_E` to :data:`WIDE_FEW_MAX_TOK_E` (:data:`WIDE16_BLOCK`, up to ten, to
    :data:`WIDE16_MAX_TOK_E` for fewer than :data:`MANY_EXPERTS` experts; for more to
    :data:`WIDE_MANY_MAX_TOK_E`, then :data:`MANY_88_BLOCK` to :data:`MANY_88_MAX_TOK_E`)
    and :data:`TWO_ITEM_BLOCKS` (one) from there to :data:`TWO_ITEM_MAX_TOK_E`.
    """
    if num_slots < 0:
        raise ChordInputError(f"num_slots: expected a non-negative count, got {num_slots}")
    tok_e = num_slots / max(1, weight.num_experts)
    if tok_e <= 3.5:
        return 8
    if tok_e <= WGMMA_MIN_TOK_E:
        return 16
    if weight.profile in WGMMA_PROFILES:
        many = weight.num_experts >= MANY_EXPERTS
        if tok_e <= (NARROW_MANY_MAX_TOK_E if many else NARROW_MAX_TOK_E):
            return WIDE_BLOCK
        if many and tok_e <= MANY_32_MAX_TOK_E:
            return 32
        tile = 8 * math.ceil((tok_e + 1.9 * math.sqrt(tok_e)) / 8)  # 80 at tok_e 64
        if tile <= PREFILL_ONE_BLOCK_MAX:
            block = max(32, tile)
            return PREFILL_BLOCK_STAND_IN if block == PREFILL_BLOCK else block
        if many and tok_e <= MANY_104_MAX_TOK_E:
            return PREFILL_ONE_BLOCK_MAX
        if WIDE_MIN_TOK_E < tok_e <= (WIDE_MANY_MAX_TOK_E if many else WIDE_FEW_MAX_TOK_E):
            return WIDE16_BLOCK if not many and tok_e <= WIDE16_MAX_TOK_E else WIDE_BLOCK
        if many and WIDE_MANY_MAX_TOK_E < tok_e <= MANY_88_MAX_TOK_E:
            return MANY_88_BLOCK
        if tok_e > WIDE_MAX_TOK_E:
            return next((block for up_to, block in TWO_ITEM_BLOCKS if tok_e <= up_to), PREFILL_BLOCK)
        return PREFILL_BLOCK
    if tok_e <= 17.0:  # a 24-row tile rarely overflows at tok_e 16 and wastes less than 32
        return 24
    if 28.0 < tok_e <= 64.0 and weight.k >= 1024:
        # Two 32-token blocks would stream most experts' weights twice. Not for K = 256 (its
        # 64-token configuration is slow) nor beyond tok_e 64, where 32 measured faster.
        return 64
    return 32


def layer_block_m(w13: PackedWeight, w2: PackedWeight, num_slots: int) -> int:
    """One routing block size for both GEMMs of a layer (gate_up ``w13``, down ``w2``; ``num_slots``
    as :func:`choose_block_m` takes it): the smaller of theirs, so that one routing serves both."""
    return min(choose_block_m(w13, num_slots), choose_block_m(w2, num_slots))


WGMMA_BLOCK_MS = tuple(dict.fromkeys((WIDE_BLOCK, *range(32, PREFILL_ONE_BLOCK_MAX + 8, 8),
                                      *(block for _, block in TWO_ITEM_BLOCKS))))
"""Every WGMMA block :func:`choose_block_m` picks on sm_90a profiles: :data:`WIDE_BLOCK`, then the
tok_e + 1.9 sigma tiles up to :data:`PREFILL_ONE_BLOCK_MAX`, :data:`PREFILL_BLOCK` among them, and
:data:`TWO_ITEM_BLOCKS`."""


def block_ms_for(weight: PackedWeight) -> tuple[int, ...]:
    """Every block size :func:`choose_block_m` may return for ``weight`` (what to warm before
    CUDA-graph capture): the decode blocks, and on sm_90a profiles every WGMMA tile it picks."""
    if weight.profile in WGMMA_PROFILES:
        return (8, 16, *WGMMA_BLOCK_MS)
    return BLOCK_MS


@functools.lru_cache(maxsize=256)
def choose_config(n: int, k: int, block_m: int) -> DecodeConfig:
    """Default decode configuration for an ``N x K`` GEMM with ``block_m``-token routing blocks.

    Decode is bound by the consumers' instruction issue, so wide per-warp tiles (one B fragment
    feeding several atoms) win wherever N fills them:

    * 8-token blocks: 256-channel CTA tiles (4 warps x 4 atoms), 256-wide K stages, 2 stages,
      2 CTAs per SM, balanced schedule (a few items per CTA would leave a ragged last wave);
    * 16-32-token blocks (2-4 mma N tiles, more accumulators): 128-channel tiles, 2 CTAs per SM;
    * 48-64-token blocks: activations take as much shared memory per stage as weights, so one CTA
      per SM, with 192-channel tiles (4 warps x 3 atoms; four atoms need more than 255 registers)
      for K >= 1024, or eight one-atom warps for K = 256;
    * every other shape: the shape-independent :func:`general_config`.

    The planner may switch a balanced configuration to its strided twin (:func:`choose_schedule`);
    on sm_90a it gives short-K GEMMs of 16-32-token blocks :func:`short_k_config`'s wider tiles.
    """
    if n >= 256 and block_m == 8 and (k >= 1024 or k == 256):
        return DecodeConfig(block_m=8, warps=4, mt=4, bk=256, stages=2, ctas_per_sm=2, schedule="balanced")
    if n >= 128 and 16 <= block_m <= 32 and (k >= 1024 or k == 256):
        stages = max_stages(block_m, warps=4, mt=2, bk=256, ctas_per_sm=2, limit=3)
        return DecodeConfig(block_m=block_m, warps=4, mt=2, bk=256, stages=stages, ctas_per_sm=2, schedule="balanced")
    if n >= 192 and block_m > 32 and k >= 1024:
        stages = max_stages(block_m, warps=4, mt=3, bk=256, ctas_per_sm=1, limit=3)
        return DecodeConfig(block_m=block_m, warps=4, mt=3, bk=256, stages=stages, ctas_per_sm=1, schedule="balanced")
    if n >= 128 and block_m > 32 and k == 256:
        stages = max_stages(block_m, warps=8, mt=1, bk=256, ctas_per_sm=1, limit=3)
        return DecodeConfig(block_m=block_m, warps=8, mt=1, bk=256, stages=stages, ctas_per_sm=1, schedule="balanced")
    return general_config(block_m)


SHORT_K_WIDE_MIN_N = 4096
"""From this N on :func:`short_k_config` has wide tiles (measured at Kimi's 7168 only)."""


@functools.lru_cache(maxsize=64)
def short_k_config(n: int, block_m: int) -> DecodeConfig | None:
    """The decode kernel's configuration for 16-32-token blocks where the planner gives it GEMMs of
    short K on sm_90a (below ``planner.WGMMA_ONE_BLOCK_MIN_K``, for 32-token blocks only above K = 256,
    where the WGMMA kernel's runs of N tiles have them since session 71; for 16-token blocks below
    ``planner.WIDE_BLOCK16_MAX_K``: TP8's down, K = 256, one stage per item, so the per-item work
    around the MMAs weighs; EP8's down, K = 2048, at 16-token blocks), or None (N below
    :data:`SHORT_K_WIDE_MIN_N`: :func:`choose_config`'s). Wider N tiles than :func:`choose_config`'s
    128 channels: 256 channels (4 warps x 4 atoms) at two CTAs per SM for 16- and 24-token blocks,
    strided; 512 (8 warps x 4 atoms) at one CTA for 32, where two CTAs of 256 channels do not fit
    shared memory, in the dynamic order. Measured on TP8's down: 15-17 %, 9-13 % and 6-8 % faster
    than the 128-channel tiles at 16-, 24- and 32-token blocks (docs/optimization.md, session 19).
    16-token blocks with row widths (a block of at most 8 rows multiplies one token tile): TP8's
    layer at 256 tokens 2-3 % faster; at 24 and 32 tokens the layer lost 1-3 % with them (session
    35). The dynamic order (items from a global counter): TP8's down up to 2.6 % faster at 896-1152
    tokens (32), its layer 0.1-1.1 %; 2-11 % slower at 16 and 24 tokens (session 36)."""
    if n < SHORT_K_WIDE_MIN_N or block_m not in (16, 24, 32):
        return None
    warps, ctas, order = (8, 1, "dynamic") if block_m == 32 else (4, 2, "strided")
    return DecodeConfig(block_m=block_m, warps=warps, mt=4, bk=256, stages=2, ctas_per_sm=ctas, schedule=order,
                        row_widths=block_m == 16)


@functools.lru_cache(maxsize=16)
def general_config(block_m: int) -> DecodeConfig:
    """The shape-independent configuration (64 x 256 stages, strided), also the fallback when a
    specialised one has no shared memory left for a long routing-block list."""
    # Several CTAs per SM keep enough weight bytes in flight per SM to cover DRAM latency;
    # wider token tiles need more shared memory per stage, so they run fewer CTAs.
    ctas = 4 if block_m <= 16 else 3 if block_m <= 32 else 2
    stages = max_stages(block_m, bk=256, ctas_per_sm=ctas)
    return DecodeConfig(block_m=block_m, bk=256, stages=stages, ctas_per_sm=ctas)


def choose_schedule(config: DecodeConfig, max_items: int, num_sms: int) -> DecodeConfig:
    """The balanced configuration, or its strided twin when there are many items per CTA.

    ``max_items`` is the routing blocks the tensors can hold times the N tiles (no device read):
    an upper bound of the work, which is what the host knows without synchronizing."""
    if config.schedule != "balanced":
        return config
    if max_items >= STRIDED_MIN_WAVES * num_sms * config.ctas_per_sm:
        return dataclasses.replace(config, schedule="strided")
    return config
