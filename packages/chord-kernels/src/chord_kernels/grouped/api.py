"""The grouped family's GEMMs: DeepGEMM-style ``contiguous`` (prefill) and ``masked`` (decode).

Both run on the indexed family's engine (the WGMMA kernel on sm_90a, the decode kernel for small
blocks), never with a host synchronization, so both are CUDA-graph capturable once a first eager
call (or :func:`prepare` plus one call) has loaded the kernel and built the per-shape index
constants. The kernels compute each mode's routing blocks themselves, from ``masked_m`` or from
``m_indices``, with no launch of their own (:class:`~chord_kernels.indexed.MaskedRows`,
:class:`~chord_kernels.indexed.api.ContiguousRows`). A routing block's rows being consecutive
rows of ``a`` in both modes, the WGMMA kernel loads each block with 2-D tensor copies
(``WgmmaConfig.tma_rows``) instead of gathering rows. :func:`contiguous_routing` and
:func:`masked_routing` build the same blocks as vLLM routing tensors, for callers of
:func:`chord_kernels.indexed.gemm`. The weight is packed with layout ``"contiguous"`` or
``"masked"`` (the indexed tiles under the grouped family's record) and each entry point refuses
the other mode's weight.
"""

from __future__ import annotations

import dataclasses
import functools

import torch

from chord_kernels import hardware
from chord_kernels.checks import output_tensor, require_int, require_tensor
from chord_kernels.errors import ChordInputError
from chord_kernels.indexed.api import (
    ContiguousRows,
    MaskedRows,
    Routing,
    check_activation,
    check_weight,
    launch_plan,
    run_gemm,
)
from chord_kernels.indexed.api import prepare as prepare_indexed
from chord_kernels.indexed.decode import BLOCK_MS
from chord_kernels.indexed.heuristics import (
    PREFILL_BLOCK,
    WGMMA_BLOCK_MS,
    WIDE_MAX_TOK_E,
    WIDE_MIN_TOK_E,
    choose_block_m,
)
from chord_kernels.indexed.planner import (
    KIMI_GATE_UP,
    KIMI_SHAPES,
    KernelConfig,
    cached_plan,
    configs_for,
)
from chord_kernels.indexed.wgmma import ARCH as WGMMA_ARCH
from chord_kernels.indexed.wgmma import WgmmaConfig, block_rows_wide_config, block_rows_wide_configs
from chord_kernels.jit import CudaKernel, distinct_sources
from chord_kernels.packed import PackedWeight
from chord_kernels.routing import CONTIGUOUS_ALIGNMENT


def contiguous_block_m(arch: str) -> int:
    """Routing block of the contiguous mode: it divides the 128-row alignment, so no block ever
    spans two experts' segments (on sm_90a the prefill block: a work item takes two, one weight
    pass per 128 rows, and an all-padding half of a segment is skipped)."""
    if arch == WGMMA_ARCH:
        return PREFILL_BLOCK
    return max(b for b in BLOCK_MS if CONTIGUOUS_ALIGNMENT % b == 0)


def contiguous_config(weight: PackedWeight, m: int, expected_m: int | None, arch: str) -> WgmmaConfig | None:
    """The contiguous mode's wide items where they may run instead of the planner's for
    :func:`contiguous_block_m` (else None): on sm_90a, with more than ``WIDE_MIN_TOK_E`` and at most
    ``WIDE_MAX_TOK_E`` expected real rows per expert (``expected_m``) and some expert past one
    128-row segment (``m`` rows above 128 per expert), the wide items of 16- or 32-row blocks
    (:func:`~chord_kernels.indexed.wgmma.block_rows_wide_config`): one weight pass for an expert of
    up to 160 rows. Both GEMMs of Kimi's EP8 layer level to 7 % faster at 120 rows per expert and
    6-19 % at 128-150, the same bits; slower at 110 (6-15 %), mixed at 115 and
    160, 6-20 % slower from 170 (docs/optimization.md, sessions 43 and 46); 9-30 % slower where
    one hot expert alone passes a segment (session 56), so the device decides from the experts'
    rows (:func:`wide_items_pay`)."""
    if (arch != WGMMA_ARCH or expected_m is None or not WIDE_MIN_TOK_E < expected_m <= WIDE_MAX_TOK_E
            or m <= CONTIGUOUS_ALIGNMENT * weight.num_experts):
        return None
    return block_rows_wide_config(weight.n, weight.k, expected_m)


def wide_items_pay(m_indices: torch.Tensor, num_experts: int, wide_rows: int) -> bool:
    """Whether the contiguous mode's wide items of up to ``wide_rows`` rows run rather than its
    128-row items, as both launches decide on the device from ``m_indices`` (``routing.cuh``
    ``wide_items_pay``): where at least a fifth of the experts present hold 129 to ``wide_rows``
    rows and more experts do than hold more. Computed here for tests and reports (it reads
    ``m_indices`` back: a host synchronization)."""
    rows = m_indices.view(-1).cpu()
    first = torch.arange(0, rows.numel(), CONTIGUOUS_ALIGNMENT)
    beyond = torch.cat([rows, torch.full((wide_rows + CONTIGUOUS_ALIGNMENT,), -1, dtype=rows.dtype)])
    expert = rows[first]
    previous = torch.cat([torch.full((1,), -1, dtype=rows.dtype), expert[:-1]])
    head = (expert >= 0) & (expert < num_experts) & (expert != previous)
    more = head & (beyond[first + CONTIGUOUS_ALIGNMENT] == expert)
    most = more & (beyond[first + wide_rows] == expert)
    fit, past = int((more & ~most).sum()), int(most.sum())
    return fit * 5 >= int(head.sum()) and fit > past


TAIL_BLOCKS_MAX_ROUNDS = 11
"""The contiguous mode cuts a sparse last round of its 64 x 2 items into single blocks
(:func:`contiguous_tail_config`) in launches of at most this many rounds of items on the SMs. Measured
on the H200 against the uncut items (docs/optimization.md, session 56): 12-15 % faster at 1.45
rounds, 2.4-2.9 % at 10.2; at 13-23 rounds within +-2 %, which the cut-enabled kernel's own cost
(0.5-1 % where nothing is cut) can outweigh."""


@functools.lru_cache(maxsize=256)
def blocks_cut(config: WgmmaConfig) -> WgmmaConfig | None:
    """``config`` with a sparse last round's items run as their single routing blocks
    (``tail_blocks``: the same bits, no workspace), or None where it takes none (items of one block,
    narrower widths without their own K loop, runs of N tiles, the weight ring)."""
    if config.items < 2 or config.widths or config.tail_parts or config.n_run or config.weight_ring:
        return None
    return dataclasses.replace(config, tail_parts=config.items, tail_blocks=True)


def contiguous_tail_config(weight: PackedWeight, m: int, arch: str, num_sms: int) -> WgmmaConfig | None:
    """The contiguous mode's planned items with their last round cut into single blocks
    (:func:`blocks_cut`) where that round is sparse (``WgmmaConfig.tail_cut``: at most half the SMs
    busy) and the launch is at most :data:`TAIL_BLOCKS_MAX_ROUNDS` rounds, else None. The host knows
    the item count here, unlike for vLLM routing: one item per 128-row segment and N tile."""
    if arch != WGMMA_ARCH:
        return None
    block_m = contiguous_block_m(arch)
    launch = cached_plan(weight.n, weight.k, block_m, m // block_m, num_sms, arch, None)
    cut = blocks_cut(launch.config) if isinstance(launch.config, WgmmaConfig) else None
    if cut is None or CONTIGUOUS_ALIGNMENT != block_m * launch.config.items:
        return None
    segments = m // CONTIGUOUS_ALIGNMENT
    items = segments * cut.ntiles(weight.n)
    if segments > launch.list_cap or items > TAIL_BLOCKS_MAX_ROUNDS * launch.grid:  # listed items only are cut
        return None
    return cut if cut.tail_cut(items, launch.grid, weight.k)[1] > 1 else None


def masked_block_m(weight: PackedWeight, expected_m: int) -> int:
    """Routing block of the masked mode: the indexed rule for ``expected_m`` rows per group (at
    least one), the same for :func:`masked` and :func:`prepare`."""
    return choose_block_m(weight, max(1, expected_m) * weight.num_experts)


@functools.lru_cache(maxsize=64)
def _masked_constants(groups: int, max_m: int, block_m: int,
                      device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """For ``[G, per_group * block_m]`` routing entries: each entry's row in its group (past
    ``max_m``: int32 max, so no count selects it), its row in ``a``, each block's first row, each
    block's group, and the used-entries count."""
    per_group = -(-max_m // block_m)
    row = torch.arange(per_group * block_m, dtype=torch.int32, device=device)
    key = torch.where(row < max_m, row, torch.iinfo(torch.int32).max).unsqueeze(0)
    flat_row = torch.arange(groups, dtype=torch.int32, device=device).unsqueeze(1) * max_m + row.unsqueeze(0)
    block_start = torch.arange(per_group, dtype=torch.int32, device=device).unsqueeze(0) * block_m
    group = torch.arange(groups, dtype=torch.int32, device=device).unsqueeze(1).expand(groups, per_group)
    used = torch.full((1,), groups * per_group * block_m, dtype=torch.int32, device=device)
    return key, flat_row, block_start, group.contiguous(), used


def masked_routing(masked_m: torch.Tensor, max_m: int, block_m: int) -> Routing:
    """The routing blocks of a masked layout: ``ceil(max_m / block_m)`` blocks per group, row ``r``
    of group ``g`` is slot ``g * max_m + r`` while ``r < masked_m[g]`` (and ``< max_m``), a block
    past the count has expert -1 (skipped), a row past it is a sentinel."""
    require_tensor("masked_m", masked_m, dtype=(torch.int32, torch.int64), ndim=1)
    max_m = require_int("max_m", max_m)
    block_m = require_int("block_m", block_m, minimum=1)
    groups = masked_m.numel()
    key, flat_row, block_start, group, used = _masked_constants(groups, max_m, block_m, masked_m.device)
    valid = masked_m.unsqueeze(1)
    sorted_token_ids = torch.where(key < valid, flat_row, groups * max_m).view(-1)
    return sorted_token_ids, torch.where(block_start < valid, group, -1).view(-1), used


def contiguous(
    a: torch.Tensor,
    weight: PackedWeight,
    m_indices: torch.Tensor,
    *,
    out: torch.Tensor | None = None,
    workspace: torch.Tensor | None = None,
    activation: str | None = None,
    expected_m: int | None = None,
    config: KernelConfig | None = None,
) -> torch.Tensor:
    """Grouped contiguous GEMM -> bf16 ``[m, N]``: row ``i`` of ``a`` ``[m, K]`` times expert
    ``m_indices[i]`` (int32 ``[m]``, on the device; -1 marks a padding row).

    Rows are grouped by expert in segments padded to 128 rows, each expert's padding after its real
    rows (``routing.contiguous_layout`` builds them; DeepGEMM's contiguous layout is the same), so
    ``m`` is a multiple of 128; the kernels read each routing block's expert from its first row.
    Output rows of padding rows are left as they are. ``workspace`` and ``activation`` (``"silu"``:
    ``silu(gate) * up`` of a ``[gate | up]`` weight, ``[m, N / 2]``) as in
    :func:`chord_kernels.indexed.gemm`; where the activation runs as a second step (not fused
    into the kernel), it writes every output row, padding rows with unspecified values.
    ``expected_m`` (optional, a host int: the mean real rows per expert, which the dispatch knows)
    lets the plan consider wider work items where experts pass one segment (:func:`contiguous_config`):
    then both launch, and the kernels run the wide items or the 128-row ones as the experts' rows in
    ``m_indices`` say (:func:`wide_items_pay`), with no host synchronization. A sparse last round
    of the 128-row items is cut into single blocks where that pays (:func:`contiguous_tail_config`).
    The result is the same bits either way. ``config`` fixes the configuration instead of the plan's
    (sweeps; its ``block_m`` must divide 128, so that no routing block spans two experts).
    """
    require_tensor("a", a, dtype=torch.bfloat16, ndim=2, device="cuda", contiguous=True)
    device = a.device
    check_weight(weight, device, mode="contiguous", what="chord_kernels.grouped.contiguous")
    check_activation(activation, weight, None, None)
    m = a.shape[0]
    require_tensor("m_indices", m_indices, dtype=torch.int32, shape=(m,), device=device, contiguous=True)
    if m % CONTIGUOUS_ALIGNMENT:
        raise ChordInputError(
            f"a: expected a multiple of {CONTIGUOUS_ALIGNMENT} rows (experts' segments padded to "
            f"{CONTIGUOUS_ALIGNMENT}; routing.contiguous_layout builds them), got {m}"
        )
    _check_expected_m(expected_m, optional=True)
    if config is not None and CONTIGUOUS_ALIGNMENT % config.block_m:
        raise ChordInputError(f"config: expected a block_m dividing the {CONTIGUOUS_ALIGNMENT}-row segments, "
                              f"got {config.block_m}")
    out = output_tensor(out, (m, _width(weight, activation)), dtype=torch.bfloat16, device=device, contiguous=True)
    if m == 0:
        return out
    arch, num_sms = hardware.arch(device.index), hardware.num_sms(device.index)
    block_m = contiguous_block_m(arch)
    wide = contiguous_config(weight, m, expected_m, arch) if config is None else None
    if config is None:
        config = contiguous_tail_config(weight, m, arch, num_sms)
    if wide is not None and not _decide_in_kernel(weight, m, (config, wide), arch, num_sms, activation):
        config, wide = wide, None
    if wide is None:
        return run_gemm(a, weight, ContiguousRows(m_indices), block_m=config.block_m if config else block_m, top_k=1,
                        out=out, workspace=workspace, activation=activation, block_rows=True, config=config)
    # The per-expert rows that decide between the wide items and the 128-row ones are on the device:
    # both launch, and each kernel computes whether it is the one to run.
    for launched in (config, wide):
        run_gemm(a, weight, ContiguousRows(m_indices, choice_rows=wide.block_m * wide.items,
                                           choice_wide=launched is wide),
                 block_m=launched.block_m if launched else block_m, top_k=1, out=out, workspace=workspace,
                 activation=activation, block_rows=True, config=launched)
    return out


def _decide_in_kernel(weight: PackedWeight, m: int, configs: tuple[WgmmaConfig | None, WgmmaConfig], arch: str,
                      num_sms: int, activation: str | None) -> bool:
    """Whether each of the contiguous mode's pair of launches (None: the planner's) can decide in its
    kernel: the kernel reads the rows itself and fuses any activation (a second step would also run
    on the output of the launch that declined)."""
    for config in configs:
        block_m = config.block_m if config else contiguous_block_m(arch)
        launched = launch_plan(weight, block_m, m // block_m, num_sms, arch, config=config,
                               tok_e=None if config else m / weight.num_experts, activation=activation,
                               block_rows=True).config
        if not (isinstance(launched, WgmmaConfig) and launched.reads_contiguous_rows
                and (activation is None or launched.silu_mul)):
            return False
    return True


def _check_expected_m(expected_m: object, *, optional: bool = False) -> None:
    """``expected_m``: a non-negative host int (or None where ``optional``)."""
    if optional and expected_m is None:
        return
    if isinstance(expected_m, bool) or not isinstance(expected_m, int) or expected_m < 0:
        raise ChordInputError(f"expected_m: expected a non-negative integer{' or None' if optional else ''}, "
                              f"got {expected_m!r}")


def _width(weight: PackedWeight, activation: str | None) -> int:
    """Output channels: N, or N / 2 after SiLU-and-mul."""
    return weight.n // 2 if activation else weight.n


def masked(
    a: torch.Tensor,
    weight: PackedWeight,
    masked_m: torch.Tensor,
    expected_m: int,
    *,
    out: torch.Tensor | None = None,
    workspace: torch.Tensor | None = None,
    activation: str | None = None,
) -> torch.Tensor:
    """Grouped masked GEMM -> bf16 ``[G, max_m, N]``: group ``g`` multiplies its first
    ``masked_m[g]`` rows of ``a`` (``[G, max_m, K]`` or ``[G * max_m, K]``) by expert ``g``.

    ``masked_m`` is int32 ``[G]`` on the device (the count DeepEP's low-latency dispatch returns;
    a count above ``max_m`` selects ``max_m`` rows, a negative one none); ``expected_m`` (a host
    int, the mean rows per group) sizes the routing blocks; the kernels compute the blocks from
    ``masked_m`` (no launch of their own). Output rows past ``masked_m[g]`` are left as they are.
    ``workspace`` and ``activation`` (``[G, max_m, N / 2]``) as in :func:`chord_kernels.indexed.gemm`;
    where the activation runs as a second step (the decode kernel's blocks), rows past the counts
    hold unspecified values.
    """
    require_tensor("a", a, dtype=torch.bfloat16, ndim=(2, 3), device="cuda", contiguous=True)
    device = a.device
    check_weight(weight, device, mode="masked", what="chord_kernels.grouped.masked")
    check_activation(activation, weight, None, None)
    groups = weight.num_experts
    require_tensor("masked_m", masked_m, dtype=torch.int32, shape=(groups,), device=device)
    if (a.dim() == 3 and a.shape[0] != groups) or (a.dim() == 2 and a.shape[0] % groups):
        raise ChordInputError(
            f"a: expected [{groups}, max_m, K] or [{groups} * max_m, K] for the weight's {groups} groups, "
            f"got {list(a.shape)}"
        )
    _check_expected_m(expected_m)
    max_m = a.shape[0] // groups if a.dim() == 2 else a.shape[1]
    flat = a.view(groups * max_m, a.shape[-1])
    width = _width(weight, activation)
    out = output_tensor(out, (groups, max_m, width), dtype=torch.bfloat16, device=device, contiguous=True)
    if max_m == 0:
        return out
    block_m = masked_block_m(weight, expected_m)
    # The kernels compute the routing from masked_m (no launch of its own; rows past a count are
    # never written, so non-local blocks need no zeroing).
    run_gemm(flat, weight, MaskedRows(masked_m.contiguous(), max_m), block_m=block_m, top_k=1,
             out=out.view(groups * max_m, width), workspace=workspace, activation=activation, zero_nonlocal=False,
             tok_e=max(1, expected_m))
    return out


def prepare(weight: PackedWeight, *, expected_m: int | None = None,
            device: torch.device | str | int | None = None, activation: str | None = None) -> None:
    """Compile and load what :func:`contiguous` (with ``expected_m``, what it may launch with it) or
    :func:`masked` (``expected_m`` required) launches for ``weight`` (with ``activation``: the
    launches that apply it); call it before CUDA-graph capture."""
    dev = hardware.cuda_device(device)
    if weight.mode == "masked" and expected_m is None:
        raise ChordInputError("expected_m: the masked mode sizes its blocks from it; pass the mean rows per group")
    _check_expected_m(expected_m, optional=True)
    if weight.mode == "masked":
        prepare_indexed(weight, masked_block_m(weight, expected_m), dev, activation=activation, block_rows=True)
        return
    arch = hardware.arch(dev.index)
    block_m = contiguous_block_m(arch)
    prepare_indexed(weight, block_m, dev, activation=activation, block_rows=True)
    # contiguous() cuts its items' sparse last round into blocks at some m.
    for planned in configs_for(weight.n, weight.k, block_m, arch):
        cut = blocks_cut(planned) if isinstance(planned, WgmmaConfig) else None
        if cut is not None:
            prepare_indexed(weight, block_m, dev, activation=activation, block_rows=True, config=cut)
    # contiguous() takes the wide items where some expert passes one segment: m is not known here.
    past_one_segment = CONTIGUOUS_ALIGNMENT * (weight.num_experts + 1)
    wide = contiguous_config(weight, past_one_segment, expected_m, arch)
    if wide is not None:
        prepare_indexed(weight, wide.block_m, dev, activation=activation, block_rows=True, config=wide)


@functools.cache
def kernels(arch: str) -> list[CudaKernel]:
    """The family's precompile hook: the kernels the Kimi shapes launch in contiguous mode (its wide
    items and its items' block cut included) and, at every block size, in masked mode (with their
    fused SiLU-and-mul and one-fma twins)."""
    wgmma = arch == WGMMA_ARCH
    found: dict[KernelConfig, None] = {}
    for block_m in dict.fromkeys((contiguous_block_m(arch), *((16, *WGMMA_BLOCK_MS) if wgmma else ()))):
        for n, k in KIMI_SHAPES:
            for planned in configs_for(n, k, block_m, arch):
                if not isinstance(planned, WgmmaConfig):  # the decode kernel gathers rows in every mode
                    found[planned] = None
                    continue
                cfg = planned.with_tma_rows()
                found[cfg] = None
                if (n, k) in KIMI_GATE_UP and cfg.fits_silu_mul(n):
                    found[dataclasses.replace(cfg, silu_mul=True)] = None
                cut = blocks_cut(cfg) if block_m == contiguous_block_m(arch) else None
                if cut is not None:
                    found[cut] = None
                    if (n, k) in KIMI_GATE_UP and cut.fits_silu_mul(n):
                        found[dataclasses.replace(cut, silu_mul=True)] = None
    if wgmma:
        for n, k in KIMI_SHAPES:
            for cfg in block_rows_wide_configs(n, k):
                found[cfg] = None
                if (n, k) in KIMI_GATE_UP and cfg.fits_silu_mul(n):
                    found[dataclasses.replace(cfg, silu_mul=True)] = None
    # Each with its one-fma twin, for weights whose scales are all below 2^-5; each source once (``shift_pairs``
    # shows in the source only in the one-fma form).
    return distinct_sources(c.kernel() for c in (*found, *(dataclasses.replace(c, subnormal=True) for c in found)))
