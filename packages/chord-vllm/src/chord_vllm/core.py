"""One MoE layer as vLLM's experts run it, without vLLM.

Standard format (:func:`moe_standard`): routing -> gate_up GEMM -> SiLU-and-mul -> down GEMM (x top-k
weight) -> top-k sum, into buffers the caller owns (vLLM's workspaces). Batched format
(:func:`moe_batched`, DeepEP low-latency): the same GEMMs over each expert's first rows of a
``[E, max_m, H]`` buffer, unweighted and unreduced (the all2all's combine weights and sums). Numerics are Chord's contract (docs/formats.md): the top-k weight
multiplies the down GEMM's fp32 accumulator before its one bf16 rounding, SiLU(gate) * up runs in
fp32 and rounds once, and the top-k sum adds in fp32 and rounds once — bit for bit
:func:`chord_kernels.reference.moe_layer`.

Everything is host arithmetic on shapes plus device work: no host synchronization, so a whole call
can be captured in a CUDA graph once :func:`prepare` has compiled the kernels. The GPU tests drive
this module directly, on hosts where vLLM cannot be installed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from chord_kernels import PackedWeight, grouped, indexed, reference, routing

Routing = tuple[torch.Tensor, torch.Tensor, torch.Tensor]
"""vLLM's ``moe_align_block_size`` result: sorted_token_ids, expert_ids, num_tokens_post_padded."""

def kernel_gemm(a: torch.Tensor, weight: PackedWeight, route: Routing, *, block_m: int, top_k: int,
                topk_weights: torch.Tensor | None, out: torch.Tensor, workspace: object = None,
                activation: str | None = None, zero_nonlocal: bool = True, out_position: bool = False,
                tok_e: float | None = None) -> None:
    """The call site of ``chord_kernels.indexed.gemm`` (writes ``out``; with ``activation``
    "silu", SiLU-and-mul of the ``[gate | up]`` output; ``zero_nonlocal=False`` leaves rows of
    non-local slots unwritten; ``out_position``: rows in routing order; ``tok_e``: the expected rows
    per local expert). Without ``workspace`` the GEMM uses chord-kernels' default of the current
    (device, stream), so vLLM's dual-batch overlap (two micro-batches on two streams) never shares one."""
    indexed.gemm(a, weight, *route, block_m=block_m, top_k=top_k, topk_weights=topk_weights, out=out,
                 workspace=workspace, activation=activation, zero_nonlocal=zero_nonlocal, out_position=out_position,
                 tok_e=tok_e)


def kernel_masked_gemm(a: torch.Tensor, weight: PackedWeight, rows: indexed.MaskedRows, *, block_m: int,
                       out: torch.Tensor, activation: str | None = None, expected_m: float | None = None) -> None:
    """The call site of ``chord_kernels.indexed.gemm_masked``: each expert's first rows of a
    batched layout (``expected_m`` of them on average), the routing blocks computed by the kernels
    from the counts."""
    indexed.gemm_masked(a, weight, rows, block_m=block_m, out=out, activation=activation, expected_m=expected_m)


def kernel_down_sum(act: torch.Tensor, w2: PackedWeight, route: Routing, topk_weights: torch.Tensor,
                    topk_ids: torch.Tensor, expert_map: torch.Tensor | None, *, block_m: int,
                    down: torch.Tensor, out: torch.Tensor, routing_order: bool = False) -> None:
    """The call site of ``chord_kernels.indexed.gemm_topk_sum``: the down GEMM x top-k weight
    summed over each token's local choices into ``out`` (``down`` holds unreduced rows on the way;
    ``routing_order``: ``act`` in routing order, loaded block by block)."""
    indexed.gemm_topk_sum(act, w2, *route, topk_weights, topk_ids, block_m=block_m, expert_map=expert_map,
                          out=out, slot_rows=down, routing_order=routing_order)


def reference_gemm(a: torch.Tensor, weight: PackedWeight, route: Routing, *, block_m: int, top_k: int,
                   topk_weights: torch.Tensor | None, out: torch.Tensor, workspace: object = None,
                   activation: str | None = None, zero_nonlocal: bool = True, out_position: bool = False,
                   tok_e: float | None = None) -> None:
    """:func:`kernel_gemm` computed by ``chord_kernels.reference`` (CPU tests, no kernels; rows of
    non-local slots are always zero; slot order only: its ``routing_order_rows`` is 0)."""
    del zero_nonlocal, tok_e
    if out_position:
        raise ValueError("the reference backend writes rows in slot order only")
    result = reference.indexed_gemm(a, weight, *route, block_m=block_m, top_k=top_k, topk_weights=topk_weights)
    out.copy_(reference.silu_and_mul(result) if activation == "silu" else result)


def reference_masked_gemm(a: torch.Tensor, weight: PackedWeight, rows: indexed.MaskedRows, *, block_m: int,
                          out: torch.Tensor, activation: str | None = None, expected_m: float | None = None) -> None:
    """:func:`kernel_masked_gemm` computed by ``chord_kernels.reference`` over the blocks
    ``grouped.masked_routing`` builds (the ones the kernels compute)."""
    del expected_m
    route = grouped.masked_routing(rows.masked_m, rows.max_m, block_m)
    reference_gemm(a, weight, route, block_m=block_m, top_k=1, topk_weights=None, out=out, activation=activation)


def reference_down_sum(act: torch.Tensor, w2: PackedWeight, route: Routing, topk_weights: torch.Tensor,
                       topk_ids: torch.Tensor, expert_map: torch.Tensor | None, *, block_m: int,
                       down: torch.Tensor, out: torch.Tensor, routing_order: bool = False) -> None:
    """:func:`kernel_down_sum` computed by ``chord_kernels.reference``: the rows, then their fp32 sum."""
    del topk_ids, expert_map  # non-local rows are zero in the reference
    if routing_order:
        raise ValueError("the reference backend reads rows in slot order only")
    reference_gemm(act, w2, route, block_m=block_m, top_k=1, topk_weights=topk_weights, out=down)
    out.copy_(down.view(out.shape[0], -1, out.shape[1]).float().sum(dim=1))


def chord_align(topk_ids: torch.Tensor, block_m: int, num_experts: int,
                expert_map: torch.Tensor | None) -> Routing:
    """``chord_kernels.routing.align_block_size``: vLLM's contract (CUDA kernels on the GPU), graph-safe."""
    r = routing.align_block_size(topk_ids, block_m, num_experts, expert_map)
    return r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded


@dataclass(frozen=True)
class Backend:
    """Where the GEMMs (plain, and down with the top-k sum) and the routing come from."""

    gemm: Callable[..., None]
    align: Callable[[torch.Tensor, int, int, torch.Tensor | None], Routing]
    name: str
    down_sum: Callable[..., None] = kernel_down_sum
    masked_gemm: Callable[..., None] = kernel_masked_gemm
    routing_order_rows: Callable[[PackedWeight, PackedWeight, Routing, int, torch.device, float], int] = \
        indexed.routing_order_rows
    """Rows of the activation in routing order (0: slot order), ``chord_kernels.indexed.routing_order_rows``."""


KERNELS = Backend(kernel_gemm, chord_align, "chord kernels")
REFERENCE = Backend(reference_gemm, chord_align, "chord reference (PyTorch)", reference_down_sum,
                    reference_masked_gemm, lambda *_: 0)


def block_m_for(w13: PackedWeight, w2: PackedWeight, num_tokens: int, top_k: int,
                global_num_experts: int) -> int:
    """One routing block size for both GEMMs, from shapes only (graph-safe).

    With expert parallelism ``topk_ids`` are global, so the local slot count is scaled by
    local / global experts before the heuristic sees it.
    """
    local_slots = math.ceil(num_tokens * top_k * w13.num_experts / max(1, global_num_experts))
    return indexed.layer_block_m(w13, w2, local_slots)


DECODE_ROWS_PER_EXPERT = 8
"""Rows per local expert assumed by :func:`moe_batched` when the caller knows no better (a decode
step of Kimi K2 under DP8: 48 tokens per rank x 8 choices / 384 experts x 8 ranks)."""


def workspace_shapes(num_tokens: int, n: int, k: int, top_k: int, routing_rows: int = 0
                     ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(workspace13, workspace2, output) for ``N = 2I`` gate_up rows and hidden size ``K``.

    The down GEMM writes the output (its top-k sums) while it still reads the activation, so both
    the activation (the gate_up GEMM's SiLU-and-mul output) and the down rows of tokens with
    several local choices live in workspace2 (:func:`_slot_buffer_sizes`), and workspace13 holds
    nothing but the output, which vLLM lets share its memory. ``routing_rows``
    (:func:`routing_rows_bound`) makes room for the activation in routing order.
    """
    act, down = _slot_buffer_sizes(num_tokens, n, k, top_k, routing_rows)
    return (num_tokens, k), (act + down,), (num_tokens, k)


def routing_rows_bound(w13: PackedWeight, w2: PackedWeight, num_tokens: int, top_k: int,
                       global_num_experts: int) -> int:
    """Most rows the routing of :func:`moe_standard` can hold (``moe_align_block_size``'s
    ``slots + experts x (block_m - 1)``, plus a block of rounding): what the activation needs in
    routing order. From shapes only."""
    block_m = block_m_for(w13, w2, num_tokens, top_k, global_num_experts)
    return num_tokens * top_k + (global_num_experts + 1) * (block_m - 1) if num_tokens else 0


def _slot_buffer_sizes(num_tokens: int, n: int, k: int, top_k: int, routing_rows: int = 0) -> tuple[int, int]:
    """Elements of the activation (in slot order, or ``routing_rows`` rows in routing order;
    rounded up to 16 bytes, so the down rows stay aligned) and of the down rows in workspace2."""
    slots = num_tokens * top_k
    return -(-max(slots, routing_rows) * (n // 2) // 8) * 8, slots * k


def batched_workspace_shapes(num_experts: int, max_m: int, n: int, k: int
                             ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(workspace13, workspace2, output) of :func:`moe_batched` for ``[num_experts, max_m, K]``
    activations: the activation (the gate_up GEMM's SiLU-and-mul output) in workspace2, the down
    rows straight into the output, which vLLM lets share workspace13's memory (so workspace13 is
    the output's size)."""
    rows = num_experts * max_m
    return (rows, k), (rows, n // 2), (num_experts, max_m, k)


def _view(buffer: torch.Tensor | None, shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
    if buffer is None:
        return torch.empty(shape, dtype=like.dtype, device=like.device)
    return buffer.reshape(-1)[: math.prod(shape)].view(shape)


def gate_up_act(hidden: torch.Tensor, w13: PackedWeight, route: Routing, *, block_m: int, top_k: int,
                act: torch.Tensor, backend: Backend, routing_order: bool = False, tok_e: float | None = None) -> None:
    """gate_up GEMM with SiLU(gate) * up in fp32 rounded once, into ``act`` (in slot order, or
    with ``routing_order`` one row per routing entry): fused into the WGMMA kernel's epilogue, or
    the two steps inside ``chord_kernels.indexed.gemm`` elsewhere. Rows of non-local slots are
    left unwritten: the down GEMM never reads them."""
    backend.gemm(hidden, w13, route, block_m=block_m, top_k=top_k, topk_weights=None, out=act, activation="silu",
                 zero_nonlocal=False, out_position=routing_order, tok_e=tok_e)


def moe_standard(
    hidden: torch.Tensor,
    w13: PackedWeight,
    w2: PackedWeight,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
    *,
    global_num_experts: int | None = None,
    expert_map: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
    workspace13: torch.Tensor | None = None,
    workspace2: torch.Tensor | None = None,
    backend: Backend = KERNELS,
) -> torch.Tensor:
    """A whole MoE layer on ``[M, H]`` bf16 activations -> ``out`` ``[M, H]`` bf16.

    ``w13`` holds ``[E_local, 2I, H]`` (gate rows then up rows), ``w2`` ``[E_local, H, I]``.
    ``topk_ids`` are global expert ids; with ``expert_map`` (global -> local id or -1) only local
    experts contribute, giving this rank's partial sum. Workspaces follow :func:`workspace_shapes`
    (missing ones are allocated); ``out`` may share workspace13's memory, never workspace2's.
    """
    m, top_k = topk_ids.shape
    n, k = w13.n, w2.n
    if hidden.shape != (m, w13.k) or w2.k * 2 != n:
        raise ValueError(
            f"hidden {list(hidden.shape)} / topk_ids {list(topk_ids.shape)}: expected [{m}, {w13.k}] "
            f"activations for w13 [{w13.num_experts}, {n}, {w13.k}] and w2 [{w2.num_experts}, {k}, {w2.k}]"
        )
    if expert_map is None and global_num_experts not in (None, w13.num_experts):
        raise ValueError(f"global_num_experts={global_num_experts} differs from the "
                         f"{w13.num_experts} local experts; pass expert_map for expert parallelism")
    num_experts = global_num_experts if global_num_experts is not None else w13.num_experts
    out = _view(out, (m, k), hidden)
    if m == 0:
        return out
    block_m = block_m_for(w13, w2, m, top_k, num_experts)
    route = backend.align(topk_ids, block_m, num_experts, expert_map)
    # Where both GEMMs run on the WGMMA kernel, gate_up writes its rows in routing order and down
    # loads them in blocks with tensor copies (no row gathers); a workspace2 sized without room for
    # that (workspace_shapes' routing_rows) keeps the slot order.
    tok_e = m * top_k / num_experts
    rows = backend.routing_order_rows(w13, w2, route, block_m, hidden.device, tok_e)
    act_size, down_size = _slot_buffer_sizes(m, n, k, top_k, rows)
    if workspace2 is not None and workspace2.numel() < act_size + down_size:
        rows = 0
        act_size, _ = _slot_buffer_sizes(m, n, k, top_k)
    act = _view(workspace2, (rows or m * top_k, n // 2), hidden)
    gate_up_act(hidden.contiguous(), w13, route, block_m=block_m, top_k=top_k, act=act, backend=backend,
                routing_order=rows > 0, tok_e=tok_e)
    down = _view(None if workspace2 is None else workspace2.reshape(-1)[act_size:], (m * top_k, k), hidden)
    backend.down_sum(act, w2, route, topk_weights, topk_ids, expert_map, block_m=block_m, down=down, out=out,
                     routing_order=rows > 0)
    return out


def moe_batched(
    hidden: torch.Tensor,
    w13: PackedWeight,
    w2: PackedWeight,
    expert_num_tokens: torch.Tensor,
    *,
    expected_m: int = DECODE_ROWS_PER_EXPERT,
    out: torch.Tensor | None = None,
    workspace13: torch.Tensor | None = None,
    workspace2: torch.Tensor | None = None,
    backend: Backend = KERNELS,
) -> torch.Tensor:
    """The experts of a batched (masked) layout: ``hidden`` ``[E_local, max_m, H]`` bf16 holds
    expert ``e``'s rows in ``hidden[e, :expert_num_tokens[e]]`` -> ``out`` ``[E_local, max_m, H]``,
    the SiLU-and-mul MLP of each such row, neither weighted nor reduced.

    ``expert_num_tokens`` is int32 on the device with at least ``E_local`` entries (the first
    ``E_local`` count; a count above ``max_m`` takes ``max_m`` rows). Rows past an expert's count
    are not read, and their output rows hold garbage. ``expected_m`` (a host int: mean rows per
    expert) sizes the routing blocks, so nothing reads the device. Workspaces follow
    :func:`batched_workspace_shapes` (missing ones are allocated); ``out`` may share
    workspace13's memory.
    """
    num_experts, n, k = w13.num_experts, w13.n, w2.n
    if hidden.dim() != 3 or hidden.shape[0] != num_experts or hidden.shape[2] != w13.k or w2.k * 2 != n:
        raise ValueError(
            f"hidden {list(hidden.shape)}: expected [{num_experts}, max_m, {w13.k}] activations for "
            f"w13 [{num_experts}, {n}, {w13.k}] and w2 [{w2.num_experts}, {k}, {w2.k}]"
        )
    if expert_num_tokens.dtype != torch.int32 or expert_num_tokens.dim() != 1 \
            or expert_num_tokens.numel() < num_experts:
        raise ValueError(f"expert_num_tokens: expected int32 [>= {num_experts}], got "
                         f"{expert_num_tokens.dtype} {list(expert_num_tokens.shape)}")
    max_m = hidden.shape[1]
    out = _view(out, (num_experts, max_m, k), hidden)
    if max_m == 0:
        return out
    rows = num_experts * max_m
    rows_per_expert = max(1, min(expected_m, max_m))
    block_m = indexed.layer_block_m(w13, w2, rows_per_expert * num_experts)
    # The kernels compute the routing blocks from the counts: nothing is launched for them.
    groups = indexed.MaskedRows(expert_num_tokens[:num_experts].contiguous(), max_m)
    act = _view(workspace2, (rows, n // 2), hidden)
    backend.masked_gemm(hidden.reshape(rows, w13.k).contiguous(), w13, groups, block_m=block_m, out=act,
                        activation="silu", expected_m=rows_per_expert)
    # Unweighted: DeepEP's combine applies the top-k weights and sums (TopKWeightAndReduceDelegate).
    backend.masked_gemm(act, w2, groups, block_m=block_m, out=out.view(rows, k), expected_m=rows_per_expert)
    return out


def prepare(w13: PackedWeight, w2: PackedWeight, device: torch.device, *, batched: bool = False) -> None:
    """Compile and load every kernel :func:`moe_standard` (or, ``batched``, :func:`moe_batched`,
    whose WGMMA kernels load each routing block's rows with tensor copies) may launch for these
    weights and allocate Chord's per-device scratch, outside any CUDA-graph capture."""
    indexed.prepare_layer(w13, w2, device, masked=batched)
