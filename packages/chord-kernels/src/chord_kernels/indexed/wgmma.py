"""The indexed WGMMA kernel (sm_90a, ``include/chord/indexed/wgmma.cuh``): its configuration and
its generated source.

Same routing contract, arguments and packed layout as the decode kernel; the tokens are the
wgmma N dimension, so ``block_m`` may be any multiple of 8 up to 256, and a work item may take up
to ``items`` consecutive routing blocks of one expert (one weight pass for all of them). As for the decode kernel,
the host's shared-memory size and thread count are checked against the device's by
static_asserts in the generated source.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

from chord_kernels.errors import ChordInputError
from chord_kernels.hardware import SMEM_PER_SM, SMEM_RESERVED_PER_CTA
from chord_kernels.indexed.args import ARGS, prelude
from chord_kernels.indexed.heuristics import (
    DYNAMIC_MIN_K,
    PREFILL_BLOCK,
    WIDE16_BLOCK,
    WIDE_BLOCK,
    WIDE_MIN_TOK_E,
)
from chord_kernels.indexed.layout import ATOM_BYTES, ATOM_K, ATOM_N
from chord_kernels.indexed.workspace import WorkspaceLayout
from chord_kernels.jit import CudaKernel
from chord_kernels.routing import CONTIGUOUS_ALIGNMENT

ARCH = "sm_90a"
"""wgmma and setmaxnreg exist on sm_90a only."""
ENTRY = "chord_indexed_wgmma"
SMEM_LIMIT = SMEM_PER_SM - SMEM_RESERVED_PER_CTA
"""Dynamic shared memory of the one CTA per SM."""
LIST_RESERVE = 4096
"""Shared bytes kept for the compacted work-item list when sizing stages."""
TOPK_LIST_RESERVE = 512
"""Shared bytes a top-k-sum twin must leave for the work-item list (128 items: an EP8 rank's 48
experts in runs of up to 2 items; beyond, the kernel walks every routing block)."""


WIDE_SHORT_K = 2048
"""Up to this K (the down GEMMs) the wide items are six blocks (144 tokens) with K loops for
:data:`WIDE_SHORT_K_WIDTHS` (up to :data:`WIDE_SEVEN_MIN_TOK_E` rows per expert). Measured on Kimi's
down GEMMs at 121-150 rows per expert against seven blocks at every width (ptxas serializing every
wgmma, C7512): 14-17 % faster up to 128 rows, level at 149 (an expert past 144 rows takes a second
item) (docs/optimization.md, session 14)."""
WIDE_SHORT_K_WIDTHS = (1, 3, 5, 6)
"""Block counts of those items' K loops: 5 and 6 for most experts, 1 and 3 for the rest of an
expert past 144 rows (four widths still compile without serialization; five do not)."""
WIDE_SEVEN_WIDTHS = (6, 7)
"""Block counts of the seven-block items' K loops (gate_up beyond :data:`WIDE_SHORT_K`; down from
:data:`WIDE_SEVEN_MIN_TOK_E` rows per expert): an item of up to six blocks runs at six. With every
width ptxas serializes every wgmma (C7512); with these two and :data:`WIDE_CONSUMER_REGS` it
pipelines them: gate_up 6-11 % faster at 121-149 rows per expert (docs/optimization.md, session 16)."""
WIDE_CONSUMER_REGS = 224
"""Consumer registers of the seven-block items (216 elsewhere): the room ptxas needs to pipeline two
168-token widths (the producer keeps 56)."""
WIDE_SEVEN_MIN_TOK_E = 134.0
"""Beyond this many rows per expert the down GEMMs (K <= :data:`WIDE_SHORT_K`) take seven-block
items too: 5-16 % faster at 136-149 rows per expert, where many experts pass 144 rows; at 121-128
level in one run, up to 8 % slower in another (session 16). Known where the layer's top-k ids are
(:func:`gemm_topk_sum`)."""
BLOCK_ROWS_WIDE = ((142.0, 16, 10, (8, 9, 10)), (math.inf, 32, 5, (2, 4, 5)))
"""The wide items over consecutive rows (:func:`block_rows_wide_config`), as (up to this many expected
rows per expert, routing block, blocks per item, block counts of the item's K loops): 160 tokens per
item, whose accumulators fit two tiles per warpgroup and whose three 128-wide stages fit shared
memory next to the weight ring, in blocks that divide the grouped contiguous mode's 128-row segments;
ptxas pipelines three K loops and serializes every wgmma with four. 16-row blocks at 128, 144 and 160
tokens let an expert of 129-144 rows compute 144: level to 9 % faster than 32-row blocks at 4, 5 (2 for
the rest of an expert past 160) from 121 to 142 rows per expert, -5 to +2 % at 145, 1-8 % slower at 150,
where more experts pass 160 and their rest runs 128 tokens wide (docs/optimization.md, sessions 43 and
46)."""

PREFILL_ROW_WIDTHS = (96, 112)
"""Token counts the 64 x 2 prefill items' K loop is also compiled for (besides 64 and 128), where K >
:data:`ROW_WIDTHS_MIN_K`: an expert whose last item holds 65-112 rows then computes 96 or 112 wgmma
columns instead of 128. Measured 3-11 % faster per GEMM at 85-341 rows per expert (EP8) and 4096-8192
tokens (TP8 gate_up); three counts (80, 96, 112) measured no better (docs/optimization.md, session 17)."""
ONE_BLOCK_ROW_WIDTHS_MIN = 32
"""The narrowest one-block item with row widths (:func:`_row_widths`): below 32 tokens a wgmma costs
the same whatever its width (docs/optimization.md, session 11)."""
TAIL_PARTS_MAX = 32
"""The most parts a split tail's item is cut into (``WgmmaConfig.tail_parts``)."""
TAIL_CUT_PARTS = 8
"""The planned split tail (:func:`choose_wgmma_config`): a sparse last round's items cut along K into
up to 8 parts, on routing blocks of at most :data:`TAIL_CUT_MAX_BLOCK` tokens from :data:`TAIL_CUT_MIN_K`
on, where N makes many N tiles per block (:data:`TAIL_CUT_MIN_N`: EP's gate_up at 9-32 rows per expert,
DeepEP low latency's). Interleaved on an H100, the whole layer (docs/optimization.md, session 59): 7-8 %
faster at 16 rows per expert with one hot expert (EP8 and DeepEP low latency: the hot expert's blocks
leave a fourth round of 4 items, cut into 8 parts each), 2 % at 24; where nothing is cut 0.2-1 % slower.
Not on 48- and 56-token blocks (the layer 1-1.4 % slower uniform, no faster skewed), TP8's gate_up (N =
512: a hot expert is one of 384, the layer 0.2-2 % slower), the downs (K = 2048: parts of 2-3 stages
measured 1-6 % slower) nor the 64 x 2 items (their uncut twin 2-3 % slower, their cuts no faster)."""
TAIL_CUT_MIN_K = 4096
"""The planned split tail's shortest K (:data:`TAIL_CUT_PARTS`): 16 stages of 256, 2+ per part."""
TAIL_CUT_MIN_N = 2048
"""The planned split tail's narrowest N (:data:`TAIL_CUT_PARTS`)."""
TAIL_CUT_MAX_BLOCK = 40
"""The planned split tail's widest routing blocks (:data:`TAIL_CUT_PARTS`)."""
ROW_WIDTHS_MIN_K = 256
"""The 64 x 2 items' row widths only above this K: at K = 256 (TP8's down, one stage per item) they
measured 7 % slower where few items are part-filled (8192 tokens), 9 % faster where many are (4096)."""


GROUP_PAIR_MIN_K = 4096
"""From this K (the gate_up GEMMs) the 64 x 2 items commit per K group on whole stages, without their row
widths, with which ptxas would serialize that loop (docs/optimization.md, session 61: 0.4-6 % faster,
interleaved on an H100, at grouped contiguous 256 / 512, EP8 341 rows per expert and TP8 12288 tokens);
below (the downs: 2.5 % slower at EP8 341, where the row widths count), per K step with them."""

CTA_PAIR_MIN_K = 4096
"""From this K (the gate_up GEMMs) the wide items (the weight ring's 16 x 10 and 24 x 7) run in clusters of
two CTAs that share each item's gathered rows (``WgmmaConfig.cta_pair``): interleaved on an H100, the same
bits, EP8's gate_up 1-5.5 % faster at 121-149 rows per expert, TP8's level to 4.5 % faster at 6144 and 6960
tokens; the items on two 256-K stages 2-40 % slower paired (each stage's fill is its gathers, then the push),
and on 128-K stages of their own slower still (docs/optimization.md, session 66)."""

PREFETCH_ROWS_MIN_K = 4096
"""From this K (the gate_up GEMMs) the items on two 256-K stages of at least :data:`PREFETCH_ROWS_MIN_TOKENS`
tokens whose rows come mostly from DRAM (one-block items, or N of at most two N tiles: each row is read once per
N tile, the rest from L2) ask L2 for the next stage's rows with each stage's gathers (``prefetch_rows``).
Interleaved on an H100, the same bits (docs/optimization.md, sessions 67 and 68): TP8's gate_up 6-12 % faster at
2496 and 2688 tokens (72-token items), 12-14 % at 3200 (88), 5-6 % at 4096 (104), 5-7 % at 4800 (64 x 2), 4-5 % at
8192 (96), 3-4 % at 12288 (64 x 2); EP8's 5-10 % at 52 and 57 rows per expert (72), 4-6 % at 64 (80), 1-3 % at 160
(96), 1 % at 185 (104). The items on three stages (32 and 56 tokens) measured 1-8 % slower with it, EP8's 64 x 2
items (16 N tiles) at 100 and 341 rows per expert level to 1.7 % slower, the wide items 5-7 %; prefetching from only
one of an item's N tiles, or each N tile a share of the rows, gained less (session 68)."""
PREFETCH_ROWS_MIN_TOKENS = 72
"""The narrowest item (tokens) of :data:`PREFETCH_ROWS_MIN_K`'s rule: the 72-token items, the narrowest on two
stages and two consumer warpgroups. The 24 x 2 items (two stages, four consumer warpgroups) measured level with it
(-0.6 to +0.4 %, session 68), and their producer spills 12 bytes with it under EP8's split tail."""

STREAM_OUT_MAX_K = 256
"""Up to this K (TP8's down, in runs of N tiles) the WGMMA kernel copies the weights with an evict-normal L2 policy
and stores its output with streaming stores (``WgmmaConfig.stream_out``): the weights of an expert's other routing
blocks stay in L2 while 0.9 GB of output streams past. Interleaved on an H100, the same bits (docs/optimization.md,
session 69): TP8's down 2-5 % faster at 4096-12288 tokens (the layer 1 % at 8192); EP's down (K = 2048) level to
2 % faster at 341 rows per expert and 1-2 % slower at 16 (the top-k sum reads its output from L2 there); TP8 8192's
gate_up 0.4-0.6 % slower with the weights evict-normal."""

GROUP_ONE_BLOCK_MAX_K = 2048
"""Up to this K (EP's downs) the one-block items of up to :data:`GROUP_ONE_BLOCK_MAX_TOKENS` tokens commit
per K group on whole stages (session 61: 0-4.5 % faster at EP8 56-171 rows per expert); from K = 4096
(gate_up) they stay per step (72-96 tokens 0-7 % slower per group; 104 faster with SiLU fused, but its
plain twin spills)."""

GROUP_ONE_BLOCK_MAX_TOKENS = 96
"""The widest one-block item committing per K group below :data:`GROUP_ONE_BLOCK_MAX_K` (at 104 the plain
and tensor-copy items spill 4 bytes: ptxas)."""

GROUP_SHIFTED_MIN_TOKENS = 96
"""From K = 4096 (gate_up) the one-block items of this many tokens and more (96 and 104) commit per K group on
whole stages with their nibble pairs shifted to bit 0 (:func:`_pairs_shifted`; docs/optimization.md, session 63:
interleaved on an H100, bit for bit, 4.0-4.6 % faster at 104 tokens, -1.8 to +0.9 % at 96; with the pairs in
place that loop was 1-6 % slower). At 72-88 tokens not measured; the downs stay as they are (96: -1.6 to +1.5 %)."""

FOUR_CONSUMER_MIN_K = 4096
"""From this K on (Kimi's gate_up GEMMs, K = 7168) the items of blocks of up to
:data:`FOUR_CONSUMER_MAX_TOKENS` tokens on 256-K stages run four consumer warpgroups of two 64-channel
tiles each (512-channel N tiles, two stages: the most that fit, beyond 40 tokens with the epilogue in
16-token passes) instead of two. Interleaved against two warpgroups, bit for bit: gate_up 1-6 %
faster at 12-24 rows per expert (EP8) and 512-1024 tokens (TP8) in three timings of one run, 2-3 %
in the run of session 24; the layer up to 2 % faster at TP8 512 and EP8 12 rows per expert. 16-token
blocks (-1 to +2 %) and the down GEMMs (K = 2048: 2-5 % slower) keep two; 128-K stages (three to
five of them) measured 38-66 % slower (docs/optimization.md, session 25)."""
FOUR_CONSUMER_MAX_TOKENS = 24
"""The widest block of those items (24 tokens: the pairs of :data:`FOUR_CONSUMER_NARROW_ITEMS`). Up to
session 30 four warpgroups also took the 32-48-token one-block items (session 25: -4.8 to +1.0 % at 48
tokens); with the one-fma form's pairs read in place (session 32) two warpgroups with whole K stages
measured 1-3 % faster at 32-token blocks (TP8 1024 tokens, EP8 20 rows per expert) and level at 40 and
48 (-4.5 to +2.6 %), while the 24-token pairs stay 5-10 % faster on four (docs/optimization.md)."""
FOUR_CONSUMER_MIN_N = 512
"""The narrowest weight (N) whose items take four warpgroups (measured at 512 and 4096): narrower
ones would leave warpgroups without channels."""
FOUR_CONSUMER_REGS = 104
"""Consumer registers of those configurations: 640 threads get 96 each at launch, and at 112 the
producer's 32 spill (ptxas); at 104 nothing spills and no wgmma is serialized."""
FOUR_CONSUMER_NARROW_ITEMS = 2
"""Blocks per item of those configurations at :data:`~chord_kernels.indexed.heuristics.WIDE_BLOCK`
(24 tokens; the K loop at 24 and 48): an expert past 24 rows stays one item instead of a second
weight pass, and EP8's 48 blocks of 8 N tiles (TP8's 384 of one) stay 2.9 waves on 132 SMs, where
with one-block items two such experts under EP8 (thirteen under TP8) start a fourth wave (the layer
10-18 % slower). The same bits; gate_up alone 4-6 % faster than one-block items even where no
expert passes 24 rows (EP8 12-16 and TP8 10 rows per expert; 2 % slower at TP8 16 with 8 experts
past 24), the layer 1-3 % faster (1.5 % slower at TP8 16; docs/optimization.md, session 26)."""


THREE_CONSUMER_MAX_TOKENS = 32
"""Below :data:`FOUR_CONSUMER_MIN_K` (the down GEMMs, K = 2048) the one-block items of 24 and 32 tokens
run three consumer warpgroups of two 64-channel tiles (384-channel N tiles) where N is at least
:data:`THREE_CONSUMER_MIN_N`: Kimi's EP8 down at 48 routing blocks is 19 N tiles, 6.9 waves on 132
SMs, where 256-channel tiles make 10.2 (11 steps) and four warpgroups' 512-channel ones 5.1 (6 steps).
Interleaved against two warpgroups, the same bits: the down 8-15 % faster at 10-16 rows per expert
(24-token blocks) where the routing holds 48 blocks, 3-5 % where an expert past 24 rows makes 49
(7.05 waves), 4-7 % at 20 rows (32-token blocks, 48 blocks) and level to 3 % slower at 49; the layer
3-5 % faster (EP8, DeepEP low latency) at 10-14 rows, 1-4 % at 16, -3 to +1 % at 20. 40- and 48-token
items measured -4 to +10 % (two stages), gate_up's 32-48-token ones 3-17 % (docs/optimization.md,
session 42). 128 consumer registers (the producer keeps 128): 144 and 152 measured level or slower."""
THREE_CONSUMER_MIN_N = 7168
"""The narrowest weight (N) whose items take three warpgroups: the one N measured (Kimi's down)."""
THREE_CONSUMER_REGS = 128
"""Consumer registers of those configurations (512 threads: 128 each at launch)."""


RUN_MAX_K = 256
"""Up to this K (TP8's down: one 256-K stage per item) the 256-K configurations take runs of N tiles
over a resident activation tile, on two consumer warpgroups in turns (:data:`RUN_TILES`) or four at once
(:data:`RUN_FOUR_CONSUMER_TOKENS`, :data:`RUN_FOUR_CONSUMER_TILES`)."""
RUN_TILES = 7
"""N tiles per run of the two warpgroups in turns (a quarter of Kimi's 28 at N = 7168). Against the same configurations
without runs, TP8's down alone, interleaved, bit for bit: -1.5 to -17.1 % with slot-order rows and
-1.5 to -11.7 % in routing order at 1280-12288 tokens (40-80-token blocks and 64 x 2 items); runs of
14 and 28 N tiles lost at 8192 tokens (too few runs per SM to balance: up to +20 %), two resident
tiles with two weight stages lost to one tile with three, and 64-token epilogue passes changed
nothing (docs/optimization.md, session 21)."""

RUN_FOUR_CONSUMER_TOKENS = (32, 104)
"""The one-block items (narrowest, widest block) whose runs of N tiles run four consumer warpgroups of
one 64-channel tile each (the same 256-channel N tiles, :data:`RUN_FOUR_CONSUMER_REGS` registers,
every warpgroup at once) instead of two of two tiles in turns: a warpgroup's epilogue, as long as its
K loop at K = 256, hides behind three others' wgmmas instead of one's. Interleaved against the two,
TP8's down from rows in routing order, the same bits: 0-5 % faster at 40-56-token blocks (1280-2048
tokens), 7-11 % at 72-104 (2560-9000 tokens, 8192 among them) (docs/optimization.md, session 47); at
32-token blocks 0.4-2.3 % (896-1152 tokens, session 71), where they replace the decode kernel
(``planner.WGMMA_ONE_BLOCK_MIN_K``); 24-token blocks keep the decode kernel. The
64 x 2 items too, at :data:`RUN_FOUR_CONSUMER_PAIR_REGS` registers. A fused SiLU-and-mul needs a
warpgroup's gate and up tiles: on these runs (K <= :data:`RUN_MAX_K`, a down projection in every MoE
model) it runs as a second step, and the epilogue top-k sum has no twin
(:meth:`WgmmaConfig.topk_sum_twin`)."""
RUN_FOUR_CONSUMER_TILES = 4
"""N tiles per run of those four-warpgroup runs, taken from the global counter (the dynamic order) rather
than strided. An expert's routing blocks read the same weights; in strided runs of seven fewer of the second
reads hit L2 (ncu, TP8 8192's down: 27 % of L2 reads hit and 574 MB read from DRAM, where weights, scales
and rows are 430 MB; 37-46 % and 439-454 MB with runs of 4, 7 or 14 from the counter or of four strided).
Against strided runs of :data:`RUN_TILES` (the plan before), TP8's down from rows in routing order, interleaved,
the same bits: 0.6-3.4 % faster at 1024-8192 tokens, 3.5-7.7 % at 5120 and 12288 (64 x 2 items); the layer
0.2-3.0 % (one timing of three +0.5 % at 4096). Against it runs of seven from the counter were up to 4 %
slower, strided runs of four up to 6.5 % (docs/optimization.md, session 73)."""
RUN_FOUR_CONSUMER_REGS = 96
"""Registers per thread of those configurations: the launch's share of 640 threads, so the producer
keeps its 96 (with 104 for the consumers several blocks spill 8-24 bytes; ptxas, session 47)."""
RUN_FOUR_CONSUMER_PAIR_REGS = 104
"""Consumer registers of the 64 x 2 items' runs on four warpgroups of one tile (the producer keeps 64):
at 96 ptxas serializes their wgmmas (1-5 % slower than two warpgroups in turns); at 104, with the grid
size read per item (held in a register, the tensor-copy producer spilled it), TP8's down measured 3.3-4.8 %
faster than two warpgroups in turns from 5120 to 16384 tokens, 0.2-3.4 % at 4608, bit for bit
(docs/optimization.md, session 51)."""


def _row_widths(block_m: int, items: int, mt: int, k: int) -> tuple[int, ...]:
    """Row widths (:class:`WgmmaConfig`) of the default configurations with two tiles per warpgroup,
    where the count saves columns often. The one-block items of 32-56 tokens (K loop committing per K
    group) at 8 tokens less up to 40 and at 8 and 16 less from 48: EP8's GEMMs 1.5-15.5 % faster at
    20-48 rows per expert, TP8's gate_up 2-6 % at 896-2048 tokens, the layer 0.3-7 % (level at TP8
    2048 tokens), the same bits (docs/optimization.md, session 37); with runs of N tiles (TP8's down)
    8 less only: the down 3-7 % faster at 1280-2304 tokens, the layer 0.3-4 %, where 8 and 16 less
    gained more on the down at 1536-1664 tokens but less on the layer (session 38). The
    72- and 80-token blocks (tok_e + 1.9 sigma tiles of 48-64 rows per expert) at 8 and 16 tokens less
    (with runs of N tiles, from 80 tokens, 8 less only), 2-10 % faster per GEMM; the 64 x 2 items at
    :data:`PREFILL_ROW_WIDTHS` above :data:`ROW_WIDTHS_MIN_K` and below :data:`GROUP_PAIR_MIN_K`, where
    the K loop commits per K step anyway (per-step commits cost the narrower tiles 9-14 %). The whole
    layer measured 1-10 % faster at 52-341 rows per expert (EP8) and 3072-4096 tokens (TP8), level at
    8192 (session 17)."""
    if mt != 2:
        return ()
    if items == 1 and ONE_BLOCK_ROW_WIDTHS_MIN <= block_m < 72:
        return (block_m - 8,) if block_m <= 40 or k <= RUN_MAX_K else (block_m - 16, block_m - 8)
    if items == 1 and block_m >= 72:  # with two tiles, 144 accumulator x token registers and up
        # With runs (K <= RUN_MAX_K) from 80 tokens one count: two spill 16 bytes in the gather
        # producer (ptxas, session 21).
        return (block_m - 8,) if k <= RUN_MAX_K and block_m >= 80 else (block_m - 16, block_m - 8)
    if items == 2 and block_m == PREFILL_BLOCK and ROW_WIDTHS_MIN_K < k < GROUP_PAIR_MIN_K:
        return PREFILL_ROW_WIDTHS  # (from GROUP_PAIR_MIN_K the K loop commits per K group: no row widths)
    return ()


def _align(x: int, to: int) -> int:
    return (x + to - 1) // to * to


@dataclass(frozen=True)
class WgmmaConfig:
    """One instantiation of ``chord::indexed::WgmmaConfig``: ``block_m``-token routing blocks, up to
    ``items`` of them (consecutive, one expert) per work item, the wgmma N being the item's tokens;
    ``mt`` 64-channel tiles per consumer warpgroup, ``bk`` K per stage, ``stages``, ``consumers``;
    ``weight_ring`` (``bk`` 128 only): the weights in their own two-slot ring of 256-K tiles;
    ``silu_mul`` (``mt`` 2 only): fused SiLU-and-mul, the weight being ``[gate | up]`` (N = 2I, I a
    multiple of 64) and the output ``silu(gate) * up`` (``[slots, I]``); ``topk_sum``: the output is
    also summed over each token's local slots into ``[tokens, N]`` (N a multiple of 8); ``dynamic``:
    a CTA takes its items after the first from a global counter in the workspace (else every
    grid-th item); ``tma_rows``: each routing block's rows are consecutive rows of ``a`` (the
    grouped modes), loaded with one tensor copy per block and 64-K slice (the launch passes the
    tensor map of ``a``, :func:`rows_descriptor`) instead of gathered row by row; ``widths``: the
    block counts the K loop is compiled for (``items`` always among them; empty: every count), an
    item running at the narrowest that holds its blocks; ``consumer_regs``: registers per consumer
    thread after ``setmaxnreg`` (the producer warpgroup gets the rest of the launch's pool);
    ``row_widths``: token counts between those (multiples of 8 below the widest item) the K loop is
    also compiled for, an item then running at the narrowest count that holds its last real row;
    ``n_run`` (``bk`` 256, K <= 256: one stage per item): a CTA takes runs of up to ``n_run`` N tiles
    of one item, whose activation rows stay in shared memory for the run (the stages hold weights
    only); ``pingpong`` (with ``n_run``): the two consumer warpgroups take turns on the tensor
    cores, so that one's epilogue overlaps the other's wgmmas; ``whole_stages``: K is a multiple of
    ``bk`` (the launch refuses another), so that the K loop checks no bound (and commits per K group
    at widths it otherwise commits per step: :attr:`commit_per_step`)."""

    block_m: int
    mt: int = 1
    bk: int = 256
    stages: int = 4
    consumers: int = 2
    items: int = 1
    weight_ring: bool = False
    silu_mul: bool = False
    topk_sum: bool = False
    dynamic: bool = False
    tma_rows: bool = False
    widths: tuple[int, ...] = ()
    consumer_regs: int = 216
    row_widths: tuple[int, ...] = ()
    n_run: int = 0
    pingpong: bool = False
    whole_stages: bool = False
    subnormal: bool = False
    """Dequantize with one fma per pair of weights (``PackedWeight.small_scales`` weights only; the
    planner sets it from the weight), the pairs at bit 4 read in place unless ``shift_pairs``."""
    shift_pairs: bool = False
    """With ``subnormal``: shift every nibble pair to bit 0 first (three shifts per code word instead
    of one; the per-step loops of the one-block items with row widths are faster so)."""
    tail_parts: int = 0
    """Split tail (0: off): where the whole items leave a last round of at most half the grid, that
    round's items are cut along K into up to this many parts of whole stages, the last part to finish
    summing every part's fp32 partial from the workspace in part order into its accumulators, then the
    item's epilogue. Deterministic, but a token's bits then depend on its batch's item count. The plan
    takes it for long items of few tokens (:data:`TAIL_CUT_PARTS`); elsewhere its kernel runs 1-4 % slower
    than the uncut one where nothing is cut and seldom gains where it cuts (docs/optimization.md,
    sessions 56, 58 and 59)."""
    tail_blocks: bool = False
    """With ``tail_parts``: cut the tail's items into up to that many runs of their routing blocks
    (at most ``items``) instead of along K, each run an item of its own over the whole K: the same
    bits as the uncut item, no workspace; for items of two or more blocks whose narrower widths all
    have their K loop (``widths`` empty). The grouped contiguous mode's short launches take it
    (``grouped.contiguous_tail_config``; docs/optimization.md, sessions 55 and 56)."""
    cta_pair: bool = False
    """Launch in clusters of two CTAs that take each item's two N tiles side by side (``ntiles`` even:
    the launch refuses another N): each gathers half of the item's activation rows and pushes its half
    into the other's stage with shared-to-shared bulk copies, so the rows are gathered once per two N
    tiles. Rows gathered only (not ``tma_rows``), items of one N tile (``n_run`` 0), no split tail
    (docs/optimization.md, session 66)."""
    prefetch_rows: bool = False
    """With a stage's row gathers also ask L2 for each row's lines of the next stage
    (``prefetch.global.L2``): for items on two stages whose rows mostly come from DRAM. Rows gathered only
    (not ``tma_rows``); the same bits (docs/optimization.md, session 67)."""
    stream_out: bool = False
    """Copy the weights with an evict-normal L2 policy (else evict-first) and store the output with streaming
    stores (:data:`STREAM_OUT_MAX_K`); the same bits."""

    def __post_init__(self) -> None:
        if self.block_m % 8 or not 8 <= self.block_m <= 256:
            raise ChordInputError(f"block_m: expected a multiple of 8 in [8, 256], got {self.block_m}")
        if not 1 <= self.items <= 32 or self.tile > 256:
            raise ChordInputError(f"items: expected 1..32 blocks and block_m * items <= 256 tokens, got {self}")
        if self.mt < 1 or self.mt * self.tile > 352:
            raise ChordInputError(f"mt: expected 1 <= mt and mt * block_m * items <= 352 (accumulator registers), "
                                  f"got {self}")
        if self.bk not in (128, 256):
            raise ChordInputError(f"bk: expected 128 or 256, got {self.bk}")
        if self.weight_ring and self.bk != 128:
            raise ChordInputError(f"weight_ring: expected bk=128 (the ring holds whole 256-K tiles), got {self}")
        if self.silu_mul and self.mt != 2:
            raise ChordInputError(f"silu_mul: expected mt=2 (a warpgroup's gate and up tiles), got {self}")
        if self.silu_mul and self.topk_sum:
            raise ChordInputError(f"silu_mul and topk_sum: SiLU-and-mul belongs to gate_up, the top-k sum to "
                                  f"down, got {self}")
        if self.tma_rows and self.items * (self.bk // 64) > 32:
            raise ChordInputError(f"tma_rows: expected items * bk / 64 <= 32 tensor copies per stage, got {self}")
        if self.widths and (list(self.widths) != sorted(set(self.widths)) or self.widths[0] < 1
                            or self.widths[-1] != self.items):
            raise ChordInputError(f"widths: expected ascending block counts ending at items={self.items}, got {self}")
        if self.row_widths and (list(self.row_widths) != sorted(set(self.row_widths))
                                or any(w % 8 or not 8 <= w < self.tile or w % self.block_m == 0
                                       for w in self.row_widths)):
            raise ChordInputError(f"row_widths: expected ascending multiples of 8 below the widest item "
                                  f"({self.tile} tokens) that are not whole blocks of {self.block_m}, got {self}")
        if self.consumer_regs % 8 or not 64 <= self.consumer_regs <= 240 or (
                self.consumers > 1 and self.register_pool * self.threads - self.consumer_regs * 128 * self.consumers < 24 * 128):
            raise ChordInputError(f"consumer_regs: expected a multiple of 8 in [64, 240] that leaves the producer at "
                                  f"least 24 of the launch's {self.register_pool} per thread, got {self}")
        if self.n_run < 0 or (self.n_run and (self.bk != 256 or self.weight_ring)):
            raise ChordInputError(f"n_run: expected 0, or N tiles per run with bk=256 stages of weights, got {self}")
        if self.topk_sum and self.n_run:
            raise ChordInputError(f"topk_sum: expected items of one N tile (n_run=0: with runs the sum's registers "
                                  f"spill), got {self}")
        if self.pingpong and (not self.n_run or self.consumers != 2):
            raise ChordInputError(f"pingpong: expected runs of N tiles (n_run) and two consumers, got {self}")
        if self.tail_parts and not (2 <= self.tail_parts <= TAIL_PARTS_MAX and not self.n_run
                                    and (self.tail_blocks or not self.weight_ring)):
            raise ChordInputError(f"tail_parts: expected 0, or 2..{TAIL_PARTS_MAX} parts of items of one N tile "
                                  f"(n_run=0) with the weights in the stages (weight_ring=False: its 144-168-token "
                                  f"items spill in the K loop with a split tail), got {self}")
        if self.tail_blocks and not (self.tail_parts and self.items >= 2 and not self.widths):
            raise ChordInputError(f"tail_blocks: expected tail_parts and items of 2+ blocks with every width "
                                  f"compiled (widths=()), got {self}")
        if self.cta_pair and (self.tma_rows or self.n_run or self.tail_parts):
            raise ChordInputError(f"cta_pair: expected gathered rows (tma_rows=False) in items of one N tile (n_run=0) "
                                  f"without a split tail (tail_parts=0), got {self}")
        if self.prefetch_rows and self.tma_rows:
            raise ChordInputError(f"prefetch_rows: expected gathered rows (tma_rows=False), got {self}")
        if self.stages < 2 or self.consumers not in (1, 2, 3, 4):
            raise ChordInputError(f"invalid wgmma config {self}")

    ctas_per_sm = 1

    @property
    def tile(self) -> int:
        """Tokens of the widest work item (the activation rows of a stage)."""
        return self.block_m * self.items

    @property
    def reads_contiguous_rows(self) -> bool:
        """Whether the kernel computes the grouped contiguous mode's routing from ``m_indices``
        (``WgmmaConfig::kContiguousRows``): tensor-copy kernels of two consumers whose routing
        blocks divide the mode's 128-row segments (``routing.CONTIGUOUS_ALIGNMENT``); elsewhere the
        branch made the producer spill, and the mode hands such kernels routing tensors
        (:func:`~chord_kernels.indexed.api.contiguous_routing`)."""
        return self.tma_rows and self.consumers == 2 and CONTIGUOUS_ALIGNMENT % self.block_m == 0

    @property
    def commit_per_step(self) -> bool:
        """Whether the K loop commits its wgmmas per K step (``WgmmaConfig::kCommitPerStep``, which the
        generated source checks against this), else per K group of two steps: per step from 128
        accumulators x tokens (but, with whole stages, one-block items and items without row widths or
        the weight ring) and on four consumer warpgroups."""
        group_whole = self.whole_stages and (self.items == 1 or not (self.row_widths or self.weight_ring))
        return (self.mt * self.tile >= 128 and not group_whole) or self.consumers > 3

    @property
    def threads(self) -> int:
        """Consumer warpgroups plus the producer warpgroup."""
        return 128 * (self.consumers + 1)

    @property
    def register_pool(self) -> int:
        """Registers per thread at launch (ptxas's cap at one CTA per SM), which setmaxnreg shares out."""
        return min(168, 65536 // self.threads // 8 * 8)

    @property
    def block_n(self) -> int:
        return 64 * self.mt * self.consumers

    @property
    def activation_bytes(self) -> int:
        """One K stage of the widest item's activation rows (64-K swizzled tiles of ``tile`` rows)."""
        return (self.bk // 64) * self.tile * 128

    @property
    def resident_bytes(self) -> int:
        """A run's activation tile (0 without runs: the activations travel in the stages)."""
        return self.activation_bytes if self.n_run else 0

    @property
    def stage_bytes(self) -> int:
        act = 0 if self.n_run else self.activation_bytes
        weights = 0 if self.weight_ring else self.block_n // ATOM_N * (self.bk // ATOM_K) * ATOM_BYTES
        return _align(act + weights, 1024)

    @property
    def weight_ring_bytes(self) -> int:
        """The weight ring's two 256-K tiles (0 without it)."""
        return 2 * self.block_n // ATOM_N * (256 // ATOM_K) * ATOM_BYTES if self.weight_ring else 0

    def smem_bytes(self, list_cap: int) -> int:
        """Dynamic shared memory; mirrors ``WgmmaConfig::smem_bytes`` in wgmma.cuh."""
        header = _align(16 + 8 * self.tile, 16)
        masks = 4 * self.tile if self.topk_sum else 0  # per stage
        epi_tokens = min(self.tile // 8, 2 if self.consumers > 2 and self.tile > 40 else 4) * 8
        epi = self.tile * (12 if self.topk_sum else 8) + epi_tokens * (self.mt * 128 + 16)
        barriers = (16 * self.stages + (32 if self.weight_ring else 0) + (16 if self.n_run else 0)
                    + (_align(8 * (self.stages + 4), 16) if self.cta_pair else 0))
        offset = (self.resident_bytes + self.stages * self.stage_bytes + self.weight_ring_bytes + barriers
                  + self.stages * (header + masks) + 128)
        rows = 2 * 4 * self.tile
        return offset + self.consumers * epi + rows + 4 * list_cap

    def per_cta_budget(self) -> int:
        return SMEM_LIMIT

    def with_tma_rows(self) -> WgmmaConfig:
        """This configuration loading whole routing blocks with tensor copies (the grouped modes, rows in
        routing order): nothing gathered, so nothing for a CTA pair to share or to prefetch (``cta_pair``,
        ``prefetch_rows`` off)."""
        return dataclasses.replace(self, tma_rows=True, cta_pair=False, prefetch_rows=False)

    @property
    def cluster(self) -> int:
        """CTAs per thread-block cluster (the grid is a multiple of it)."""
        return 2 if self.cta_pair else 1

    def ntiles(self, n: int) -> int:
        """N tiles of a GEMM with ``n`` weight rows (work items per routing block; with
        ``silu_mul`` each tile has half of ``block_n`` outputs, the same count for ``n`` % 128 = 0)."""
        return math.ceil(math.ceil(n / ATOM_N) / (self.block_n // ATOM_N))

    def fits_silu_mul(self, n: int) -> bool:
        """Whether this configuration's fused SiLU-and-mul twin serves a ``[gate | up]`` weight of
        ``n`` rows: two tiles per warpgroup, and 64-channel gate and up blocks (I % 64 = 0)."""
        return self.mt == 2 and n % 128 == 0

    def topk_sum_twin(self, n: int) -> WgmmaConfig | None:
        """This configuration summing the top-k for a weight of ``n`` rows (16-byte rows: ``n`` % 8
        = 0) with room for the work-item list; None where the sum must run as a second step, among
        them items compiled at a few widths and four consumer warpgroups (their accumulators or
        register share leave the sum no registers). Row widths stay on one-block items only: the
        64 x 2 items' spill next to the sum; so do runs of N tiles (40-56-token blocks): the twin
        takes items of one N tile."""
        if self.silu_mul or n % 8 or self.widths or self.consumers > 3:
            return None
        base = self
        if self.n_run:
            stages = max_stages(self.block_m, self.mt, self.bk, consumers=self.consumers, items=self.items)
            if stages < 2:
                return None
            base = dataclasses.replace(self, n_run=0, pingpong=False, stages=stages)
        if base.whole_stages and base.mt * base.tile >= 128:  # per K group by whole stages: the sum would spill
            base = dataclasses.replace(base, whole_stages=False)
            base = dataclasses.replace(base, shift_pairs=_pairs_shifted(base))
        twin = dataclasses.replace(base, topk_sum=True, row_widths=base.row_widths if base.items == 1 else ())
        return twin if twin.smem_bytes(0) + TOPK_LIST_RESERVE <= twin.per_cta_budget() else None

    def tail_cut(self, items: int, grid: int, k: int) -> tuple[int, int]:
        """How a launch of ``grid`` CTAs over ``items`` listed work items cuts its last round
        (:func:`tail_split` on the K stages, or with ``tail_blocks`` on the item's blocks): (whole
        items, parts per tail item); ``(items, 1)`` where nothing is cut or ``tail_parts`` is 0."""
        if not self.tail_parts:
            return items, 1
        return tail_split(items, grid, self.items if self.tail_blocks else -(-k // self.bk), self.tail_parts)

    def workspace(self, grid: int) -> WorkspaceLayout:
        """The dynamic schedule's two counters (next item, CTAs done), none for the strided one; with
        ``tail_parts`` an arrival counter per (tail item, consumer warpgroup) and a partial slot of
        the widest item's ``block_n x tile`` fp32 accumulators per tail part (at most one per CTA); none
        for ``tail_blocks``."""
        split_k = self.tail_parts and not self.tail_blocks
        flags = grid * self.consumers if split_k else 0
        partials = grid * self.block_n * self.tile if split_k else 0
        return WorkspaceLayout(counters=2 if self.dynamic else 0, flags=flags, partials=partials)

    @property
    def wgmma_widths(self) -> tuple[int, ...]:
        """The wgmma N of every K loop compiled (tokens)."""
        return tuple(sorted((*self.row_widths, *(self.block_m * j for j in self.compiled_widths))))

    @property
    def compiled_widths(self) -> tuple[int, ...]:
        """The item widths (in blocks) with their own K loop."""
        return self.widths or tuple(range(1, self.items + 1))

    def template_args(self) -> str:
        flags = ", ".join(str(f).lower() for f in (self.weight_ring, self.silu_mul, self.topk_sum, self.dynamic,
                                                   self.tma_rows))
        mask = sum(1 << (j - 1) for j in self.widths)
        if self.tail_parts or self.cta_pair or self.prefetch_rows or self.stream_out:  # every argument, to the last set
            tail = ", ".join(str(f).lower() for f in (self.pingpong, self.whole_stages, self.subnormal, self.shift_pairs))
            ends = [self.tail_blocks, self.cta_pair, self.prefetch_rows, self.stream_out]
            while ends and not ends[-1]:
                ends.pop()
            last = "".join(f", {str(f).lower()}" for f in ends)
            return (f"{self.block_m}, {self.items}, {self.mt}, {self.bk}, {self.stages}, {self.consumers}, {flags}, "
                    f"{mask}u, {self.consumer_regs}, {sum(1 << (w // 8 - 1) for w in self.row_widths)}u, {self.n_run}, "
                    f"{tail}, {self.tail_parts}{last}")
        sub = (", true, true" if self.shift_pairs else ", true") if self.subnormal else ""
        whole = ", true" if self.whole_stages else (", false" if sub else "")
        runs = f", {self.n_run}, {str(self.pingpong).lower()}" if self.n_run or whole else ""
        regs = f", {self.consumer_regs}" if self.consumer_regs != 216 or self.row_widths or runs else ""
        rows = f", {sum(1 << (w // 8 - 1) for w in self.row_widths)}u" if self.row_widths or runs else ""
        return (f"{self.block_m}, {self.items}, {self.mt}, {self.bk}, {self.stages}, {self.consumers}, {flags}, "
                f"{mask}u{regs}{rows}{runs}{whole}{sub}")

    def source(self) -> str:
        """The complete translation unit of this configuration."""
        entry = ARGS.entry(ENTRY, "Cfg::kThreads, 1", "chord::indexed::wgmma_kernel<Cfg>(args);",
                           attributes="__cluster_dims__(2, 1, 1)" if self.cta_pair else "")
        return _SOURCE.format(
            prelude=prelude(), template_args=self.template_args(), threads=self.threads,
            register_a="".join(_register_a_mma(n) for n in self.wgmma_widths),
            smem0=self.smem_bytes(0), smem1=self.smem_bytes(1), commit_per_step=str(self.commit_per_step).lower(),
        ) + entry

    def kernel(self) -> CudaKernel:
        return wgmma_kernel(self)


def tail_split(items: int, grid: int, stages: int, max_parts: int) -> tuple[int, int]:
    """``scheduler.cuh`` ``tail_split`` on the host: where ``items % grid`` items leave a last round of
    at most half the grid, (whole items, parts per tail item = min(max_parts, stages, grid / tail));
    else ``(items, 1)``."""
    tail = items % grid
    parts = 1 if tail == 0 else min(max_parts, stages, grid // tail)
    return (items, 1) if parts < 2 else (items - tail, parts)


def max_stages(block_m: int, mt: int, bk: int, consumers: int = 2, limit: int = 8, items: int = 1,
               weight_ring: bool = False, n_run: int = 0, consumer_regs: int = 216) -> int:
    """Deepest ring that fits one CTA per SM with room for the work-item list (0 if none)."""
    fit = 0
    for stages in range(2, limit + 1):
        cfg = WgmmaConfig(block_m=block_m, mt=mt, bk=bk, stages=stages, consumers=consumers, items=items,
                          weight_ring=weight_ring, n_run=n_run, consumer_regs=consumer_regs)
        if cfg.smem_bytes(0) + LIST_RESERVE <= SMEM_LIMIT:
            fit = stages
    return fit


def _register_a_mma(n: int) -> str:
    """``chord::wgmma::RegisterA<n>``: one wgmma m64nNk16 with A from registers (n / 2 accumulators)."""
    acc = n // 2
    d = ", ".join(f"%{i}" for i in range(acc))
    a = ", ".join(f"%{acc + i}" for i in range(4))
    outputs = ", ".join(f'"+f"(d[{i}])' for i in range(acc))
    return f"""
namespace chord::wgmma {{
template <>
struct RegisterA<{n}> {{
  __device__ __forceinline__ static void mma(float (&d)[{acc}], uint32_t a0, uint32_t a1, uint32_t a2,
                                             uint32_t a3, uint64_t desc, int scale_d) {{
    asm volatile(
        "{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{acc + 5}, 0;\\n"
        "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16 {{{d}}}, {{{a}}}, %{acc + 4}, p, 1, 1, 0;\\n}}\\n"
        : {outputs}
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc), "r"(scale_d));
  }}
}};
}}  // namespace chord::wgmma
"""


_SOURCE = r"""{prelude}
#include "chord/common/wgmma.cuh"
{register_a}
#include "chord/indexed/wgmma.cuh"

using Cfg = chord::indexed::WgmmaConfig<{template_args}>;
static_assert(Cfg::kThreads == {threads}, "host and device thread counts differ");
static_assert(Cfg::smem_bytes(0) == {smem0} && Cfg::smem_bytes(1) == {smem1},
              "host and device shared-memory plans differ (chord_kernels/indexed/wgmma.py smem_bytes)");
static_assert(Cfg::kCommitPerStep == {commit_per_step},
              "host and device commit modes differ (chord_kernels/indexed/wgmma.py commit_per_step)");

"""


@functools.cache
def wgmma_kernel(config: WgmmaConfig) -> CudaKernel:
    """The JIT kernel of one configuration (sm_90a only: wgmma and setmaxnreg)."""
    return CudaKernel(name="indexed_wgmma", source=config.source(), entry=ENTRY, arch=ARCH)


def choose_wgmma_config(n: int, k: int, block_m: int, tok_e: float | None = None) -> WgmmaConfig:
    """Default WGMMA configuration for ``N x K`` with ``block_m``-token routing blocks (``tok_e``:
    the expected rows per expert, where known).

    Measured on the H200 (docs/optimization.md): two 64-channel tiles per consumer warpgroup
    (256-channel CTA tiles: each B tile read from shared memory feeds twice the MMAs; one tile,
    three or four measured 1.1-2x slower) with whole 256-wide K stages (one 9 KB bulk copy per
    64-channel block; 128-wide stages cost more per K), as many stages as fit. The prefill blocks
    take several consecutive blocks of an expert per work item (one weight pass for all of them):
    24-token blocks up to 168 tokens on 128-wide activation stages (the widest item whose
    accumulators fit the registers and whose three stages fit shared memory) with the weights in
    their own ring of 256-K tiles (one bulk copy per block), compiled at widths 6 and 7 blocks,
    except up to 144 tokens at four widths where K <= :data:`WIDE_SHORT_K` and ``tok_e`` is at most
    :data:`WIDE_SEVEN_MIN_TOK_E`, 64-token blocks up to 128 tokens on 256-wide stages. One tile
    per warpgroup beyond 128 tokens otherwise. Items from a global counter from
    :data:`~chord_kernels.indexed.heuristics.DYNAMIC_MIN_K` on. The 72- and 80-token blocks and the
    64 x 2 items also compile narrower token counts (:func:`_row_widths`). 24-token blocks are the
    wide items unless ``tok_e`` is at most :data:`~chord_kernels.indexed.heuristics.WIDE_MIN_TOK_E`
    (the smallest tile, which ``choose_block_m`` picks up to ``NARROW_MAX_TOK_E``): then one block
    per item (two on four warpgroups, below) on 256-wide stages. Up to :data:`RUN_MAX_K` (one stage
    per item) a CTA takes runs of N tiles over a resident activation tile: on four consumer warpgroups of
    one tile at the one-block items of :data:`RUN_FOUR_CONSUMER_TOKENS` and the 64 x 2 items (runs of
    :data:`RUN_FOUR_CONSUMER_TILES`, from the global counter), else runs of :data:`RUN_TILES` on its two
    in turns.
    From :data:`FOUR_CONSUMER_MIN_K` on, the 24-token blocks (:data:`FOUR_CONSUMER_MAX_TOKENS`) that
    are not wide items run four consumer warpgroups of two tiles each, in items of up to
    :data:`FOUR_CONSUMER_NARROW_ITEMS` blocks; below it, the one-block items of up to
    :data:`THREE_CONSUMER_MAX_TOKENS` tokens run three where N is at least :data:`THREE_CONSUMER_MIN_N`.
    From K = 4096 and N = 2048 the items of routing blocks up to 40 tokens cut a sparse last round
    along K (:data:`TAIL_CUT_PARTS`).
    """
    rows = 0
    if tok_e is not None:
        rows = 1 if tok_e > WIDE_SEVEN_MIN_TOK_E else -1 if tok_e <= WIDE_MIN_TOK_E else 0
    return _choose_wgmma_config(n, k, block_m, rows)


@functools.lru_cache(maxsize=1024)
def _choose_wgmma_config(n: int, k: int, block_m: int, rows: int) -> WgmmaConfig:
    """:func:`choose_wgmma_config` by how many rows per expert it expects (``rows``: -1 at most
    :data:`~chord_kernels.indexed.heuristics.WIDE_MIN_TOK_E`, 1 more than :data:`WIDE_SEVEN_MIN_TOK_E`,
    0 between or unknown), cached: :func:`gemm_topk_sum` asks on every call."""
    cfg = _shape_wgmma_config(n, k, block_m, rows)
    # The wide items whose loop commits per K group only on whole stages (commit_per_step) take them where
    # that measured faster (GROUP_PAIR_MIN_K, GROUP_ONE_BLOCK_MAX_K, GROUP_SHIFTED_MIN_TOKENS).
    pair = cfg.items == 2 and k >= GROUP_PAIR_MIN_K and not cfg.row_widths
    one_block = cfg.items == 1 and cfg.tile <= GROUP_ONE_BLOCK_MAX_TOKENS and k <= GROUP_ONE_BLOCK_MAX_K
    shifted = cfg.items == 1 and cfg.tile >= GROUP_SHIFTED_MIN_TOKENS and k >= GROUP_PAIR_MIN_K and bool(cfg.row_widths)
    if (pair or one_block or shifted) and k % cfg.bk == 0 and cfg.commit_per_step and cfg.consumers <= 3 and not (
            cfg.n_run or cfg.weight_ring):
        cfg = dataclasses.replace(cfg, whole_stages=True)
    # Whole stages (no K bound in the K loop) where K allows them and the loop commits per K group.
    # Interleaved against the bound checked, bit for bit (docs/optimization.md, session 29): the
    # 32-56-token items 3-5 % faster (EP8's gate_up and down, TP8's gate_up, TP8's down in runs of N
    # tiles), 24 level; the per-step loops 1-15 % slower (four consumer warpgroups 7-15 %), and some
    # of them spill or serialize their wgmmas.
    shift_pairs = _pairs_shifted(cfg) or (shifted and cfg.whole_stages)
    # The split tail where a short launch's sparse last round of long items costs most (TAIL_CUT_PARTS).
    cut = (k >= TAIL_CUT_MIN_K and n >= TAIL_CUT_MIN_N and block_m <= TAIL_CUT_MAX_BLOCK and not cfg.weight_ring
           and not cfg.n_run)
    cfg = dataclasses.replace(cfg, whole_stages=k % cfg.bk == 0 and not cfg.commit_per_step, shift_pairs=shift_pairs,
                              tail_parts=TAIL_CUT_PARTS if cut else 0)
    return _streamed(_rows_prefetched(_cta_paired(cfg, n, k), n, k), k)


def _streamed(cfg: WgmmaConfig, k: int) -> WgmmaConfig:
    """``cfg`` with the weights evict-normal and streaming output stores (``stream_out``) up to
    :data:`STREAM_OUT_MAX_K`."""
    return dataclasses.replace(cfg, stream_out=True) if k <= STREAM_OUT_MAX_K else cfg


def _rows_prefetched(cfg: WgmmaConfig, n: int, k: int) -> WgmmaConfig:
    """``cfg`` asking L2 for the next stage's rows (``prefetch_rows``) under :data:`PREFETCH_ROWS_MIN_K`'s rule:
    two 256-K stages of gathered rows (not the weight ring, runs of N tiles or tensor copies), two consumer
    warpgroups, items of :data:`PREFETCH_ROWS_MIN_TOKENS` tokens or more, one block per item or at most two N
    tiles."""
    if (k >= PREFETCH_ROWS_MIN_K and cfg.stages == 2 and cfg.bk == 256 and cfg.consumers == 2
            and cfg.tile >= PREFETCH_ROWS_MIN_TOKENS and not (cfg.weight_ring or cfg.n_run or cfg.tma_rows)
            and (cfg.items == 1 or cfg.ntiles(n) <= 2)):
        return dataclasses.replace(cfg, prefetch_rows=True)
    return cfg


def _cta_paired(cfg: WgmmaConfig, n: int, k: int) -> WgmmaConfig:
    """``cfg`` in clusters of two CTAs (``cta_pair``) where it is a wide item (the weight ring) gathering its
    rows (the tensor-copy twins drop it) from :data:`CTA_PAIR_MIN_K` on, in the dynamic schedule (strided,
    the pairs gained less: session 66), and N makes an even number of N tiles."""
    if (k >= CTA_PAIR_MIN_K and cfg.weight_ring and cfg.dynamic and not (cfg.tma_rows or cfg.tail_parts)
            and cfg.ntiles(n) % 2 == 0):
        return dataclasses.replace(cfg, cta_pair=True)
    return cfg


def _pairs_shifted(cfg: WgmmaConfig) -> bool:
    """Whether the one-fma form shifts every nibble pair to bit 0 (``shift_pairs``): on the one-block items
    with row widths whose K loop commits per step (72-104-token blocks outside TP8's down), where reading the
    pairs at bit 4 in place made that loop 1-5 % slower; elsewhere in place is 1-8 % faster
    (docs/optimization.md, session 32)."""
    return cfg.items == 1 and bool(cfg.row_widths) and not cfg.n_run and cfg.commit_per_step


def _shape_wgmma_config(n: int, k: int, block_m: int, rows: int) -> WgmmaConfig:
    """The tiles, stages and items of :func:`_choose_wgmma_config`."""
    dynamic = k >= DYNAMIC_MIN_K
    if block_m == WIDE_BLOCK and rows >= 0:
        six = k <= WIDE_SHORT_K and rows == 0
        return _wide_items(n, k, block_m, 6 if six else 7, WIDE_SHORT_K_WIDTHS if six else WIDE_SEVEN_WIDTHS,
                           216 if six else WIDE_CONSUMER_REGS)
    items = 2 if block_m == PREFILL_BLOCK else 1
    mt = 2 if block_m * items <= 128 and n > 128 else 1
    bk = 256
    n_run = RUN_TILES if k <= RUN_MAX_K else 0
    if (k >= FOUR_CONSUMER_MIN_K and n >= FOUR_CONSUMER_MIN_N and items == 1 and mt == 2
            and WIDE_BLOCK <= block_m <= FOUR_CONSUMER_MAX_TOKENS):
        four_items = FOUR_CONSUMER_NARROW_ITEMS if block_m == WIDE_BLOCK else 1
        stages = max_stages(block_m, mt, bk, consumers=4, items=four_items, consumer_regs=FOUR_CONSUMER_REGS)
        if stages >= 2:
            return WgmmaConfig(block_m=block_m, mt=mt, bk=bk, stages=stages, consumers=4, items=four_items,
                               dynamic=dynamic, consumer_regs=FOUR_CONSUMER_REGS,
                               row_widths=_row_widths(block_m, four_items, mt, k))
    if (k < FOUR_CONSUMER_MIN_K and n >= THREE_CONSUMER_MIN_N and items == 1 and mt == 2 and not n_run
            and WIDE_BLOCK <= block_m <= THREE_CONSUMER_MAX_TOKENS):
        stages = max_stages(block_m, mt, bk, consumers=3, consumer_regs=THREE_CONSUMER_REGS)
        if stages >= 2:
            return WgmmaConfig(block_m=block_m, mt=mt, bk=bk, stages=stages, consumers=3, dynamic=dynamic,
                               consumer_regs=THREE_CONSUMER_REGS, row_widths=_row_widths(block_m, items, mt, k))
    stages = max_stages(block_m, mt, bk, items=items, n_run=n_run)
    if stages < 2:
        bk, n_run = 128, 0
        stages = max_stages(block_m, mt, bk, items=items)
    if stages < 2:
        raise ChordInputError(f"no WGMMA configuration fits shared memory for block_m={block_m}")
    row_widths = _row_widths(block_m, items, mt, k)
    if n_run and mt == 2 and (items == 2 or RUN_FOUR_CONSUMER_TOKENS[0] <= block_m <= RUN_FOUR_CONSUMER_TOKENS[1]):
        # The same N tile on four warpgroups of one tile, with the two-tile items' row widths.
        # Runs of RUN_FOUR_CONSUMER_TILES from the global counter, although K is below DYNAMIC_MIN_K.
        regs = RUN_FOUR_CONSUMER_PAIR_REGS if items == 2 else RUN_FOUR_CONSUMER_REGS
        stages = max_stages(block_m, 1, bk, consumers=4, items=items, n_run=RUN_FOUR_CONSUMER_TILES,
                            consumer_regs=regs)
        return WgmmaConfig(block_m=block_m, mt=1, bk=bk, stages=stages, consumers=4, items=items, dynamic=True,
                           consumer_regs=regs, row_widths=row_widths, n_run=RUN_FOUR_CONSUMER_TILES)
    return WgmmaConfig(block_m=block_m, mt=mt, bk=bk, stages=min(stages, 8), items=items, dynamic=dynamic,
                       row_widths=row_widths, n_run=n_run, pingpong=n_run > 0)


def _wide_items(n: int, k: int, block_m: int, items: int, widths: tuple[int, ...], consumer_regs: int,
                tma_rows: bool = False) -> WgmmaConfig:
    """The wide items: up to ``items`` blocks of one expert on three 128-wide activation stages, the
    weights in their own ring of 256-K tiles, the K loop compiled at ``widths`` blocks."""
    return WgmmaConfig(block_m=block_m, mt=2 if n > 128 else 1, bk=128, stages=3, items=items, weight_ring=True,
                       dynamic=k >= DYNAMIC_MIN_K, widths=widths, consumer_regs=consumer_regs, tma_rows=tma_rows)


def block_rows_wide_config(n: int, k: int, expected_m: float) -> WgmmaConfig:
    """Wide items over routing blocks of consecutive rows (the grouped contiguous mode) for
    ``expected_m`` rows per expert: up to 160 rows of one expert per item (:data:`BLOCK_ROWS_WIDE`),
    so an expert of 129-160 rows takes one weight pass where 128-row items take two; the wide
    items' 128-wide activation stages with the weights in their own ring of 256-K tiles, the rows
    loaded with tensor copies. Against the 64 x 2 items on Poisson-ragged rows, the same bits: level
    to 7 % faster at 120 rows per expert, 6-19 % at 128-150, where many experts pass one 128-row
    segment; 6-15 % slower at 110, where most fit one, -6 to +4 % at 160 and 6-20 % slower from
    170, where most pass 160; 4-6 % slower on gate_up at exactly 128 rows each
    (docs/optimization.md, sessions 43 and 46)."""
    block, items, widths = next(shape for up_to, *shape in BLOCK_ROWS_WIDE if expected_m <= up_to)
    return _block_rows_wide(n, k, block, items, widths)


@functools.lru_cache(maxsize=64)
def _block_rows_wide(n: int, k: int, block: int, items: int, widths: tuple[int, ...]) -> WgmmaConfig:
    return _wide_items(n, k, block, items, widths, WIDE_CONSUMER_REGS, tma_rows=True)


def block_rows_wide_configs(n: int, k: int) -> tuple[WgmmaConfig, ...]:
    """Every configuration :func:`block_rows_wide_config` may return for this shape."""
    return tuple(_block_rows_wide(n, k, *shape) for _, *shape in BLOCK_ROWS_WIDE)


@functools.lru_cache(maxsize=64)
def wide16_config(n: int, k: int) -> WgmmaConfig:
    """The wide items on :data:`~chord_kernels.indexed.heuristics.WIDE16_BLOCK`-token routing blocks: that
    block's shape in :data:`BLOCK_ROWS_WIDE` (up to ten blocks, K loops at 8, 9 and 10) with the rows gathered."""
    items, widths = next(shape for _, block, *shape in BLOCK_ROWS_WIDE if block == WIDE16_BLOCK)
    return _streamed(_cta_paired(_wide_items(n, k, WIDE16_BLOCK, items, widths, WIDE_CONSUMER_REGS), n, k), k)
