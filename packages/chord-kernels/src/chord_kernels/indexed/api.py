"""The indexed family's API: one GEMM on vLLM routing tensors, and a whole MoE layer on top of it.

``gemm`` reads vLLM routing tensors directly (``sorted_token_ids`` with sentinel ``num_slots``,
``expert_ids`` with -1 for non-local experts, ``num_tokens_post_padded`` on the device): no host
synchronization and no allocation beyond the output, so it can be captured in a CUDA graph once
its kernel is loaded (:func:`prepare`, or one eager call before capture). Its chain is
validate -> :func:`~chord_kernels.indexed.planner.plan` -> workspace -> argument struct -> launch.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings

import torch

from chord_kernels import hardware
from chord_kernels.checks import output_tensor, require_tensor
from chord_kernels.errors import ChordInputError, ChordLayoutError, ChordPerformanceWarning
from chord_kernels.indexed.args import ARGS
from chord_kernels.indexed.heuristics import BLOCK_MS, WIDE_BLOCK, block_ms_for, layer_block_m
from chord_kernels.indexed.layout import (
    ATOM_K,
    ATOM_N,
    ATOM_WORDS,
    LAYOUT_VERSION,
    PROFILE_ARCHS,
    PROFILES,
)
from chord_kernels.indexed.planner import (
    KernelConfig,
    LaunchPlan,
    cached_plan,
    check_block_m,
    config_for_rows,
    configs_for,
    plan_for_weight,
    routing_capacity,
    shape_workspace_bytes,
    silu_mul_twin,
    weight_config,
)
from chord_kernels.indexed.wgmma import WgmmaConfig
from chord_kernels.indexed.workspace import check_workspace, default_workspace, graph_workspace
from chord_kernels.jit import CudaKernel, compile_all
from chord_kernels.jit.tma import rows_descriptor
from chord_kernels.ops import local_topk_sum, silu_and_mul
from chord_kernels.ops import topk_sum as topk_sum_op
from chord_kernels.ops.activation import silu_and_mul_kernel
from chord_kernels.ops.align import kernels as align_kernels
from chord_kernels.ops.align import prepare as prepare_align
from chord_kernels.ops.topk import local_topk_sum_kernel
from chord_kernels.packed import PackedWeight
from chord_kernels.routing import align_block_size


def check_weight(weight: PackedWeight, device: torch.device | None = None, *, mode: str = "indexed",
                 what: str = "chord_kernels.indexed.gemm") -> PackedWeight:
    """Refuse anything but a weight in the tiles of ``mode`` (``"indexed"``, or the grouped family's
    ``"contiguous"``/``"masked"``, which share the bytes) packed for this GPU's profiles."""
    if not isinstance(weight, PackedWeight):
        raise ChordLayoutError(
            f"weight: expected a PackedWeight from chord_kernels.pack({mode!r}, ...), got "
            f"{type(weight).__name__}"
        )
    weight.require(family="indexed" if mode == "indexed" else "grouped", mode=mode, profile=PROFILES,
                   layout_version=LAYOUT_VERSION, what=what)
    tiles = weight.tensors.get("tiles")
    n16, kg = math.ceil(weight.n / ATOM_N), weight.k // ATOM_K
    require_tensor("weight.tiles", tiles, dtype=torch.int32,
                   shape=(weight.num_experts, n16 * kg, ATOM_WORDS), contiguous=True)
    if device is not None and device.type == "cuda":
        arch = hardware.arch(hardware.device_index(device))
        if arch not in PROFILE_ARCHS[weight.profile]:
            raise ChordLayoutError(
                f"weight was packed for profile {weight.profile!r} ({'/'.join(PROFILE_ARCHS[weight.profile])}) "
                f"but runs on {arch}; repack it with a profile for this GPU: "
                f"{[p for p, a in PROFILE_ARCHS.items() if arch in a]}"
            )
    return weight


def _aligned16(name: str, t: torch.Tensor) -> None:
    if t.data_ptr() % 16:
        raise ChordInputError(f"{name}: expected a 16-byte aligned data pointer, got {t.data_ptr():#x}")


def _launch_workspace(launch: LaunchPlan, weight: PackedWeight, device: torch.device,
                      stream: torch.cuda.Stream, workspace: torch.Tensor | None) -> torch.Tensor | None:
    need = launch.workspace_bytes
    if workspace is not None:
        return check_workspace(workspace, need, device)
    if need == 0:
        return None
    num_sms, arch = hardware.num_sms(device.index), hardware.arch(device.index)
    default = default_workspace(need, device, stream,
                                reserve=shape_workspace_bytes(weight.n, weight.k, BLOCK_MS, num_sms, arch))
    if default is not None:
        return default
    warnings.warn(
        "chord_kernels.indexed.gemm is captured on a stream without a workspace: a temporary is "
        "recorded into the graph with a memset before each launch; pass workspace= or call "
        "indexed.prepare() on the capturing stream before capture to avoid it",
        ChordPerformanceWarning, stacklevel=3,
    )
    return graph_workspace(launch.workspace, device)


Routing = tuple[torch.Tensor, torch.Tensor, torch.Tensor]
"""vLLM's routing tensors: ``sorted_token_ids``, ``expert_ids``, ``num_tokens_post_padded``."""


@dataclasses.dataclass(frozen=True)
class MaskedRows:
    """Routing the kernels compute from row counts (the grouped masked mode): ``a`` holds
    ``[G * max_m]`` rows, group ``g`` multiplies its first ``masked_m[g]`` (clamped to ``[0,
    max_m]``) by expert ``g``, and the routing blocks are ``ceil(max_m / block_m)`` per group —
    the blocks :func:`chord_kernels.grouped.masked_routing` builds, without launching anything."""

    masked_m: torch.Tensor  # int32 [G], contiguous, on a's device
    max_m: int


@dataclasses.dataclass(frozen=True)
class ContiguousRows:
    """Routing the kernels compute from each row's expert (the grouped contiguous mode): ``a``
    holds ``m_indices.numel()`` rows, row ``i`` multiplied by expert ``m_indices[i]`` (-1: a
    padding row, left unwritten), each expert's rows in segments whose padding follows its real
    rows and that no routing block spans (``routing.contiguous_layout``'s layout, DeepGEMM's). A
    block's expert is its first row's — the blocks :func:`contiguous_routing` builds, without
    launching anything, in the kernels that read them (``WgmmaConfig.reads_contiguous_rows`` and the
    decode kernel; :func:`run_gemm` hands the others those routing tensors). ``choice_rows`` > 0:
    the launch is one of a pair (:func:`chord_kernels.grouped.contiguous`) and runs only where
    wide items of that many rows pay (``choice_wide``) or only where they do not, as the kernel
    decides from ``m_indices`` (``routing.cuh`` ``wide_items_pay``); kernels that read the rows
    themselves only."""

    m_indices: torch.Tensor  # int32 [m], m a multiple of block_m, contiguous, on a's device
    choice_rows: int = 0
    choice_wide: bool = False


@functools.lru_cache(maxsize=64)
def _contiguous_constants(m: int, block_m: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Row indices ``[m / block_m, block_m]`` and the used-entries count ``[1]`` (built once per
    shape, outside any graph capture: each launch then costs three small ops, not seven)."""
    rows = torch.arange(m, dtype=torch.int32, device=device).view(m // block_m, block_m)
    return rows, torch.full((1,), m, dtype=torch.int32, device=device)


def contiguous_routing(m_indices: torch.Tensor, block_m: int) -> Routing:
    """The routing blocks of a contiguous layout (``block_m`` divides the 128-row alignment) as vLLM
    routing tensors — what the kernels compute from ``m_indices`` themselves (:class:`ContiguousRows`):
    block ``b`` is rows ``[b * block_m, (b + 1) * block_m)``, its expert that of its first row (-1:
    padding, skipped; an expert's padding follows its real rows), a row of another expert or of
    padding a sentinel (in a block of padding only too: the engine zeroes the slots of -1 blocks).
    Slot = row."""
    m = m_indices.numel()
    rows, used = _contiguous_constants(m, block_m, m_indices.device)
    blocks = m_indices.view(m // block_m, block_m)
    expert_ids = blocks[:, 0].contiguous()
    keep = (blocks == expert_ids.unsqueeze(1)) & (expert_ids >= 0).unsqueeze(1)
    return torch.where(keep, rows, m).view(-1), expert_ids, used


_NO_ROUTING_TENSORS = {"sorted_token_ids": None, "expert_ids": None, "num_tokens_post_padded": None}
_NO_CONTIGUOUS_ROWS = {"m_indices": None, "choice_rows": 0, "choice_wide": 0}


def _routing_args(route: Routing | MaskedRows | ContiguousRows, block_m: int, num_experts: int,
                  device: torch.device) -> tuple[dict[str, object], int]:
    """The routing fields of the kernel arguments, and the routing blocks they hold."""
    if isinstance(route, ContiguousRows):
        require_tensor("m_indices", route.m_indices, dtype=torch.int32, ndim=1, device=device, contiguous=True)
        if route.m_indices.numel() % block_m:
            raise ChordInputError(f"m_indices: expected a multiple of block_m={block_m} rows, "
                                  f"got {route.m_indices.numel()}")
        return ({**_NO_ROUTING_TENSORS, "masked_m": None, "max_m": 0, "group_blocks": 0,
                 "m_indices": route.m_indices, "choice_rows": route.choice_rows,
                 "choice_wide": int(route.choice_wide)}, route.m_indices.numel() // block_m)
    if isinstance(route, MaskedRows):
        if isinstance(route.max_m, bool) or not isinstance(route.max_m, int) or route.max_m < 0:
            raise ChordInputError(f"max_m: expected a non-negative integer, got {route.max_m!r}")
        require_tensor("masked_m", route.masked_m, dtype=torch.int32, shape=(num_experts,), device=device,
                       contiguous=True)
        group_blocks = -(-route.max_m // block_m)
        return ({**_NO_ROUTING_TENSORS, "masked_m": route.masked_m, "max_m": route.max_m,
                 "group_blocks": group_blocks, **_NO_CONTIGUOUS_ROWS}, num_experts * group_blocks)
    sorted_token_ids, expert_ids, num_tokens_post_padded = route
    require_tensor("sorted_token_ids", sorted_token_ids, dtype=torch.int32, ndim=1, device=device,
                   contiguous=True)
    require_tensor("expert_ids", expert_ids, dtype=torch.int32, ndim=1, device=device, contiguous=True)
    require_tensor("num_tokens_post_padded", num_tokens_post_padded, dtype=torch.int32, shape=(1,),
                   device=device)
    return ({"sorted_token_ids": sorted_token_ids, "expert_ids": expert_ids,
             "num_tokens_post_padded": num_tokens_post_padded, "masked_m": None, "max_m": 0, "group_blocks": 0,
             **_NO_CONTIGUOUS_ROWS},
            routing_capacity(sorted_token_ids, expert_ids, block_m))


def gemm(
    a: torch.Tensor,
    weight: PackedWeight,
    sorted_token_ids: torch.Tensor,
    expert_ids: torch.Tensor,
    num_tokens_post_padded: torch.Tensor,
    *,
    block_m: int,
    top_k: int,
    topk_weights: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
    config: KernelConfig | None = None,
    workspace: torch.Tensor | None = None,
    activation: str | None = None,
    zero_nonlocal: bool = True,
    out_position: bool = False,
    routing_order: bool = False,
    tok_e: float | None = None,
) -> torch.Tensor:
    """One indexed MoE GEMM -> bf16 ``[a.shape[0] * top_k, N]``; see
    :func:`chord_kernels.reference.indexed_gemm` for the semantics.

    ``activation="silu"`` (a ``[gate | up]`` weight of N = 2I rows, no ``topk_weights``) returns
    ``silu(gate) * up`` instead, bf16 ``[slots, I]``, bit-identical to
    :func:`chord_kernels.ops.silu_and_mul` of the plain output: fused into the WGMMA kernel's
    epilogue where it runs with two tiles per warpgroup and I % 64 = 0, and into the decode kernel's
    on its wide 16-token tiles (``planner.silu_mul_twin``), else the two steps.

    Slot ``t`` reads row ``t // top_k`` of ``a``; rows of slots in blocks whose expert is -1
    (non-local) are zero (``zero_nonlocal=False``: left unwritten, for a caller that never reads
    them, e.g. the gate_up GEMM of a layer, whose down GEMM skips those slots); sentinel entries
    are skipped. ``topk_weights`` (``[rows, top_k]`` or flat,
    fp32 or bf16) multiplies each slot's fp32 accumulator. ``config`` overrides the planner's
    configuration. ``workspace`` is a caller-owned buffer (:func:`~chord_kernels.indexed.new_workspace`,
    sized by :func:`~chord_kernels.indexed.max_workspace_bytes`) that no overlapping launch may
    share; without it, the default of the current (device, stream) is used. ``out_position``
    (block sizes of the WGMMA kernel): the output is in routing order instead, ``[num_blocks *
    block_m, N]`` with slot ``sorted_token_ids[i]``'s row at row ``i`` (padding rows unwritten, or
    unspecified where SiLU-and-mul runs as a second step), the input :func:`gemm_topk_sum` loads
    block by block with ``routing_order=True``. ``routing_order`` (WGMMA block sizes): ``a`` holds
    one row per routing entry instead (such an output), loaded block by block with tensor copies
    (the down GEMM of :func:`moe_experts`); the output stays by slot, so ``out`` (``[slots, N]``)
    is required, and ``top_k`` counts nothing. ``tok_e``: the expected rows per local expert (the
    count :func:`choose_block_m` saw over the weight's experts), which the planner needs at 24-token
    blocks (items of one block, two for gate_up, up to 120 rows; the wide items beyond); the
    default, every slot local, is exact without expert parallelism and too high with it (pass it
    there).
    """
    require_tensor("a", a, dtype=torch.bfloat16, ndim=2, device="cuda", contiguous=True)
    check_weight(weight, a.device)
    if routing_order and (out is None or out_position):
        raise ChordInputError("routing_order: expected out ([slots, N]; a's rows are routing entries, not slots) "
                              "and out_position=False")
    return run_gemm(a, weight, (sorted_token_ids, expert_ids, num_tokens_post_padded), block_m=block_m,
                    top_k=top_k, topk_weights=topk_weights, out=out, config=config, workspace=workspace,
                    activation=activation, zero_nonlocal=zero_nonlocal, out_position=out_position,
                    block_rows=routing_order, num_slots=out.shape[0] if routing_order else None, tok_e=tok_e)


def gemm_masked(
    a: torch.Tensor,
    weight: PackedWeight,
    rows: MaskedRows,
    *,
    block_m: int,
    out: torch.Tensor | None = None,
    workspace: torch.Tensor | None = None,
    activation: str | None = None,
    expected_m: float | None = None,
) -> torch.Tensor:
    """:func:`gemm` over a masked layout (DeepEP low-latency buffers): ``a`` is ``[G * max_m, K]``
    and group ``g``'s first ``rows.masked_m[g]`` rows run through expert ``g`` (top-k 1, no
    weights) -> bf16 ``[G * max_m, N]`` (or ``N / 2`` with ``activation``). The same blocks and
    results as :func:`gemm` on :func:`chord_kernels.grouped.masked_routing`'s tensors, but the
    kernels compute the blocks from the counts, so nothing else is launched. Rows past a count are
    left as they are (unspecified where the activation runs as a second step). ``expected_m``: the
    mean rows per group that ``block_m`` was chosen for (``tok_e`` of :func:`gemm`), needed at
    24-token blocks (a :class:`~chord_kernels.errors.ChordInputError` without it)."""
    require_tensor("a", a, dtype=torch.bfloat16, ndim=2, device="cuda", contiguous=True)
    check_weight(weight, a.device)
    if a.shape[0] != weight.num_experts * rows.max_m:
        raise ChordInputError(f"a: expected {weight.num_experts} groups x max_m={rows.max_m} rows, got {a.shape[0]}")
    return run_gemm(a, weight, rows, block_m=block_m, top_k=1, out=out, workspace=workspace, activation=activation,
                    zero_nonlocal=False, tok_e=expected_m)


@dataclasses.dataclass(frozen=True)
class _TopkSum:
    """What :func:`gemm_topk_sum` adds to a launch: the routing's choices and the sum's buffers."""

    topk_ids: torch.Tensor  # int32 [tokens, top_k], contiguous
    expert_map: torch.Tensor | None  # int32 [global experts], contiguous
    num_global_experts: int
    out: torch.Tensor  # bf16 [tokens, N]

    def epilogue_args(self, n: int, device: torch.device) -> dict[str, object]:
        """The kernel arguments of the WGMMA epilogue sum (its arrival counters zeroed here)."""
        tokens, top_k = self.topk_ids.shape
        return {"reduced": self.out, "topk_ids": self.topk_ids, "expert_map": self.expert_map,
                "num_global_experts": self.num_global_experts, "reduce_top_k": top_k,
                "arrivals": torch.zeros(tokens * math.ceil(n / 64), dtype=torch.int32, device=device)}

    def sum_rows(self, rows: torch.Tensor, num_local_experts: int, *, zeroed: bool) -> None:
        """The second step: ``out`` = the top-k sum of the GEMM's ``rows`` (every row when the
        non-local ones were zeroed, else the local ones only)."""
        tokens, top_k = self.topk_ids.shape
        if zeroed:
            topk_sum_op(rows.view(tokens, top_k, rows.shape[1]), out=self.out)
        else:
            local_topk_sum(rows, self.topk_ids, num_local_experts=num_local_experts, expert_map=self.expert_map,
                           out=self.out)


_NO_SUM = {"reduced": None, "arrivals": None, "topk_ids": None, "expert_map": None, "num_global_experts": 0,
           "reduce_top_k": 1}
"""The top-k-sum arguments of a launch that does not sum in its epilogue."""


def gemm_topk_sum(
    a: torch.Tensor,
    weight: PackedWeight,
    sorted_token_ids: torch.Tensor,
    expert_ids: torch.Tensor,
    num_tokens_post_padded: torch.Tensor,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
    *,
    block_m: int,
    expert_map: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
    slot_rows: torch.Tensor | None = None,
    config: KernelConfig | None = None,
    workspace: torch.Tensor | None = None,
    routing_order: bool = False,
) -> torch.Tensor:
    """The down GEMM of an MoE layer with the weighted top-k sum -> bf16 ``[M, N]``.

    ``a`` holds one row per slot (``[M * top_k, K]``, slot ``t * top_k + j`` = token ``t``'s
    choice ``j``, e.g. the gate_up GEMM's activation), routed with ``top_k=1`` by routing tensors
    built from ``topk_ids`` ``[M, top_k]`` (and ``expert_map``, global id -> local id or -1, as in
    :func:`~chord_kernels.routing.align_block_size`). Row ``t`` of the result is the fp32 sum, in
    ascending ``j`` from +0 and rounded once, of the bf16 rows ``topk_weights[t, j] * a[t*top_k+j] @
    W[e]^T`` of its local slots (zero without any). By default two steps: the GEMM, which skips the
    rows of non-local slots, then :func:`~chord_kernels.ops.local_topk_sum` (N % 8 = 0; else the
    rows of non-local slots are zeroed and :func:`~chord_kernels.ops.topk_sum` adds them). A
    WGMMA ``config`` with ``topk_sum=True`` sums in the kernel's epilogue instead (the last tile of
    a token's channels to finish adds its rows in the same order, so the result never depends on
    timing; bit-identical to the two steps): measured slower than the two steps on the H200
    (docs/optimization.md, session 8), so the planner never picks it. Every slot of ``topk_ids``
    must be in the routing (a local or a -1 block).
    ``slot_rows`` (bf16 ``[M * top_k, N]``, allocated when None) holds the unreduced rows on the way.
    ``routing_order``: ``a`` holds one row per routing entry instead (``[num_blocks * block_m, K]``,
    what :func:`gemm` writes with ``out_position``; WGMMA block sizes), loaded block by block with
    tensor copies.
    """
    require_tensor("a", a, dtype=torch.bfloat16, ndim=2, device="cuda", contiguous=True)
    check_weight(weight, a.device)
    require_tensor("topk_ids", topk_ids, dtype=(torch.int32, torch.int64), ndim=2, device=a.device)
    tokens, top_k = topk_ids.shape
    if not 1 <= top_k <= 32:
        raise ChordInputError(f"topk_ids: expected 1 to 32 choices per token, got {top_k}")
    if not routing_order and a.shape[0] != tokens * top_k:
        raise ChordInputError(f"a: expected one row per slot, {tokens} x {top_k} = {tokens * top_k}, got {a.shape[0]}")
    if topk_weights is None:
        raise ChordInputError("topk_weights: expected the [M, top_k] router weights, got None")
    if expert_map is not None:
        require_tensor("expert_map", expert_map, dtype=(torch.int32, torch.int64), ndim=1, device=a.device)
        expert_map = expert_map.to(torch.int32).contiguous()
    out = output_tensor(out, (tokens, weight.n), dtype=torch.bfloat16, device=a.device, contiguous=True)
    global_experts = expert_map.numel() if expert_map is not None else weight.num_experts
    reduce = _TopkSum(topk_ids.to(torch.int32).contiguous(), expert_map, global_experts, out)
    run_gemm(a, weight, (sorted_token_ids, expert_ids, num_tokens_post_padded), block_m=block_m, top_k=1,
             topk_weights=topk_weights, out=slot_rows, config=config, workspace=workspace, topk_sum=reduce,
             block_rows=routing_order, num_slots=tokens * top_k if routing_order else None,
             tok_e=tokens * top_k / max(1, global_experts))
    return out


ACTIVATIONS = ("silu",)
"""Activations :func:`gemm` applies to a ``[gate | up]`` output (SiLU-and-mul, Kimi's)."""


def check_activation(activation: object, weight: PackedWeight, topk_weights: torch.Tensor | None,
                     config: KernelConfig | None) -> None:
    """Refuse an activation :func:`gemm` cannot apply to ``weight``'s output (or with ``config``)."""
    if activation is not None and activation not in ACTIVATIONS:
        raise ChordInputError(f"activation: expected None or one of {list(ACTIVATIONS)}, got {activation!r}")
    if activation is not None and weight.n % 2:
        raise ChordInputError(f"activation={activation!r}: expected a [gate | up] weight of even N, got N={weight.n}")
    if activation is not None and topk_weights is not None:
        raise ChordInputError(f"activation={activation!r} with topk_weights: the top-k weight belongs to the "
                              "down GEMM, after the activation")
    fused = config is not None and config.silu_mul
    if fused and (activation is None or not config.fits_silu_mul(weight.n)):
        raise ChordInputError(f"config: {config} fuses SiLU-and-mul; expected activation='silu' and N a "
                              f"multiple of its gate and up tiles, got activation={activation!r}, N={weight.n}")


def run_gemm(
    a: torch.Tensor,
    weight: PackedWeight,
    route: Routing | MaskedRows | ContiguousRows,
    *,
    block_m: int,
    top_k: int,
    topk_weights: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
    config: KernelConfig | None = None,
    workspace: torch.Tensor | None = None,
    activation: str | None = None,
    zero_nonlocal: bool = True,
    topk_sum: _TopkSum | None = None,
    block_rows: bool = False,
    out_position: bool = False,
    num_slots: int | None = None,
    tok_e: float | None = None,
) -> torch.Tensor:
    """:func:`gemm` on a CUDA bf16 ``a`` and a weight already checked by :func:`check_weight` (for
    the indexed layout or a grouped one: the engine behind both families); with ``topk_sum``, the
    launch of :func:`gemm_topk_sum`, which returns its unreduced rows (scratch). ``block_rows``
    (implied by :class:`MaskedRows` and :class:`ContiguousRows`): routing block ``b``'s rows are rows
    ``b * block_m`` on of ``a`` (the contiguous layout, or an ``out_position`` output), so the WGMMA
    kernel loads them with tensor copies; ``num_slots`` is then the routing's slot count where it is not
    ``a.shape[0] * top_k``. ``out_position`` (WGMMA kernels): a slot's output row is its routing
    position, ``out`` holding every routing block's rows (padding rows as :func:`gemm` says).
    ``tok_e``: the expected rows per expert, which some shapes plan on (where ``config`` is None;
    default: ``num_slots`` over the weight's experts, exact without expert parallelism)."""
    device = a.device
    tiles = weight.tensors["tiles"]
    if tiles.device != device:
        raise ChordInputError(f"weight: expected tensors on {device} (like a), got {tiles.device}")
    if a.shape[1] != weight.k:
        raise ChordInputError(f"a: expected K={weight.k} columns to match the weight, got {a.shape[1]}")
    routing_args, capacity = _routing_args(route, block_m, weight.num_experts, device)
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k <= 0:
        raise ChordInputError(f"top_k: expected a positive integer, got {top_k!r}")
    if weight.num_experts >= 1 << 16:
        raise ChordInputError(f"weight: at most 65535 experts are supported, got {weight.num_experts}")
    check_block_m(block_m, hardware.arch(device.index))
    if config is not None and config.block_m != block_m:
        raise ChordInputError(f"config: its block_m {config.block_m} differs from block_m={block_m}")
    check_activation(activation, weight, topk_weights, config)
    block_rows = block_rows or isinstance(route, (MaskedRows, ContiguousRows))
    if isinstance(config, WgmmaConfig) and config.tma_rows and not block_rows:
        raise ChordInputError(f"config: {config} loads each routing block as consecutive rows of a; expected "
                              "the grouped modes' routing (chord_kernels.grouped)")
    if isinstance(config, WgmmaConfig) and config.topk_sum and (topk_sum is None or weight.n % 8):
        raise ChordInputError(f"config: {config} sums the top-k; expected gemm_topk_sum and N a multiple of 8, "
                              f"got N={weight.n}")
    routed = num_slots is not None  # a holds routing blocks' rows, not one row per token
    if routed and not block_rows:
        raise ChordInputError("num_slots: expected block_rows=True (a holding the routing blocks' rows)")
    if routed and a.shape[0] < capacity * block_m:  # a tensor copy past a's end would read zeros
        raise ChordInputError(f"a: expected a row per routing entry, {capacity} blocks x {block_m} = "
                              f"{capacity * block_m} rows, got {a.shape[0]}")
    if out_position and (topk_sum is not None or isinstance(route, (MaskedRows, ContiguousRows))):
        raise ChordInputError("out_position: expected vLLM routing tensors and no top-k sum")
    if num_slots is None:
        num_slots = a.shape[0] * top_k
    if num_slots >= 1 << 31:
        raise ChordInputError(f"a.shape[0] * top_k = {num_slots} slots exceed int32")
    weights_flat = None
    if topk_weights is not None:
        require_tensor("topk_weights", topk_weights, dtype=(torch.float32, torch.bfloat16), device=device)
        if topk_weights.numel() != num_slots:
            raise ChordInputError(f"topk_weights: expected {num_slots} weights, got {topk_weights.numel()}")
        weights_flat = topk_weights.reshape(-1).float().contiguous()
    n_out = weight.n // 2 if activation else weight.n
    out_rows = capacity * block_m if out_position else num_slots
    out = output_tensor(out, (out_rows, n_out), dtype=torch.bfloat16, device=device, contiguous=True)
    if num_slots == 0:
        return out
    _aligned16("a", a)
    _aligned16("out", out)
    if capacity == 0:
        if topk_sum is not None:
            topk_sum.out.zero_()
        return out.zero_()
    num_sms, arch = hardware.num_sms(device.index), hardware.arch(device.index)
    if config is None and tok_e is None:
        if isinstance(route, MaskedRows) and block_m == WIDE_BLOCK:
            raise ChordInputError("expected_m: 24-token blocks of a masked layout are items of one or two blocks "
                                  "up to 120 rows per group and up to seven beyond; pass the mean rows per group")
        tok_e = num_slots / weight.num_experts  # every slot on the weight's experts: exact without EP, else more
    launch = launch_plan(weight, block_m, capacity, num_sms, arch, config=config, tok_e=tok_e,
                         activation=activation, block_rows=block_rows)
    target = out  # what the kernel writes
    if activation and not launch.config.silu_mul:  # the decode kernel's other tiles, or gate/up halves
        target = torch.empty(out_rows, weight.n, dtype=torch.bfloat16, device=device)  # not in whole tiles
    reads_rows = isinstance(launch.config, WgmmaConfig) and launch.config.reads_contiguous_rows
    if isinstance(route, ContiguousRows) and route.choice_rows and (not reads_rows or target is not out):
        raise ChordInputError(f"m_indices: a launch of a pair decides in the kernel whether it runs; expected a "
                              f"configuration that reads the contiguous rows itself (and fuses any activation), "
                              f"got {launch.config}")
    if (isinstance(route, ContiguousRows) and isinstance(launch.config, WgmmaConfig)
            and not reads_rows):  # compiled without it: the routing as tensors
        routing_args, _ = _routing_args(contiguous_routing(route.m_indices, block_m), block_m, weight.num_experts,
                                        device)
    a_rows = rows_descriptor(a, block_m) if isinstance(launch.config, WgmmaConfig) and launch.config.tma_rows else None
    if (routed or out_position) and not isinstance(launch.config, WgmmaConfig):
        raise ChordInputError(f"rows in routing order: the decode kernel planned for block_m={block_m} reads and "
                              "writes rows by slot; expected a block size of the WGMMA kernel")
    in_epilogue = topk_sum is not None and isinstance(launch.config, WgmmaConfig) and launch.config.topk_sum
    reduce = topk_sum.epilogue_args(weight.n, device) if in_epilogue else _NO_SUM
    if topk_sum is not None:
        zero_nonlocal = weight.n % 8 != 0  # the local sum (N % 8 = 0) never reads non-local slots' rows
    stream = torch.cuda.current_stream(device)
    workspace = _launch_workspace(launch, weight, device, stream, workspace)  # alive until launched
    args = ARGS.pack(
        device, tiles=tiles, a=a, a_rows=a_rows, out=target, **routing_args, topk_weights=weights_flat, **launch.workspace.bind(workspace),
        n=weight.n, k=weight.k, num_experts=weight.num_experts, num_slots=num_slots, top_k=top_k,
        num_blocks=capacity, list_cap=launch.list_cap, zero_nonlocal=int(zero_nonlocal),
        out_position=int(out_position), **reduce,
    )
    launch.launch(args, device, stream)
    if topk_sum is not None and not in_epilogue:
        topk_sum.sum_rows(out, weight.num_experts, zeroed=zero_nonlocal)
    return out if target is out else silu_and_mul(target, out=out)


def launch_plan(weight: PackedWeight, block_m: int, capacity: int, num_sms: int, arch: str, *,
                config: KernelConfig | None = None, tok_e: float | None = None, activation: str | None = None,
                block_rows: bool = False) -> LaunchPlan:
    """What :func:`run_gemm` launches for ``weight`` on ``capacity`` routing blocks (host arithmetic
    only): ``config``, else the planner's for ``tok_e`` expected rows per expert, then its fused
    SiLU-and-mul twin with ``activation`` (where it has one: else the activation is a second
    launch), its tensor-copy twin with ``block_rows``, and its one-fma form for small scales."""
    if config is None and tok_e is not None:  # the expected rows per expert may pick another config
        config = config_for_rows(weight.n, weight.k, block_m, arch, tok_e)
    launch = cached_plan(weight.n, weight.k, block_m, capacity, num_sms, arch, config)
    if isinstance(launch.config, WgmmaConfig) and launch.config.n_run and weight.k > launch.config.bk:
        raise ChordInputError(f"config: {launch.config} runs N tiles over one K stage; expected K <= "
                              f"{launch.config.bk}, got K={weight.k}")
    if isinstance(launch.config, WgmmaConfig) and launch.config.whole_stages and weight.k % launch.config.bk:
        raise ChordInputError(f"config: {launch.config} has whole K stages; expected K a multiple of "
                              f"{launch.config.bk}, got K={weight.k}")
    if isinstance(launch.config, WgmmaConfig) and launch.config.cta_pair and launch.config.ntiles(weight.n) % 2:
        raise ChordInputError(f"config: {launch.config} takes N tiles in pairs; expected an even number of "
                              f"{launch.config.block_n}-row N tiles, got N={weight.n}")
    fused = silu_mul_twin(launch.config, weight.n) if activation else None
    twin = _tma_rows_twin(launch.config if fused is None else fused) if block_rows else fused
    if twin is not None and twin != launch.config:
        launch = cached_plan(weight.n, weight.k, block_m, capacity, num_sms, arch, twin)
    return plan_for_weight(launch, weight)


@functools.lru_cache(maxsize=256)
def _tma_rows_twin(config: KernelConfig) -> KernelConfig:
    """The configuration loading whole routing blocks with tensor copies where ``config`` is a
    WGMMA one (the decode kernel gathers rows whatever their order: ``config`` itself)."""
    if isinstance(config, WgmmaConfig):
        return config.with_tma_rows()
    return config


def prepare(weight: PackedWeight, block_m: int, device: torch.device | str | int | None = None, *,
            activation: str | None = None, topk_sum: bool = False, block_rows: bool = False,
            config: KernelConfig | None = None) -> None:
    """Compile and load every kernel ``gemm`` may launch for ``weight`` at ``block_m``
    (:func:`prepared_kernels`), and allocate the default workspace of ``device``'s current stream.
    Call it before CUDA-graph capture, on the stream that will capture (or pass ``workspace=`` to
    ``gemm``). For a whole layer, :func:`prepare_layer`."""
    dev = hardware.cuda_device(device)
    if torch.cuda.is_current_stream_capturing():
        raise ChordInputError("prepare() loads kernels and allocates memory: call it before CUDA-graph capture")
    num_sms, arch = hardware.num_sms(dev.index), hardware.arch(dev.index)
    check_activation(activation, weight, None, config)
    kernels = prepared_kernels(weight, block_m, arch, activation=activation, topk_sum=topk_sum, block_rows=block_rows,
                               config=config)
    compile_all(kernels, arch)  # several nvcc at a time, then each loaded
    for kernel, smem in kernels.items():
        kernel.prepare(dev, smem=smem)
    reserve = shape_workspace_bytes(weight.n, weight.k, BLOCK_MS, num_sms, arch)
    default_workspace(reserve, dev, torch.cuda.current_stream(dev), reserve=reserve)


def prepared_kernels(weight: PackedWeight, block_m: int, arch: str, *, activation: str | None = None,
                     topk_sum: bool = False, block_rows: bool = False,
                     config: KernelConfig | None = None) -> dict[CudaKernel, int]:
    """The kernels :func:`prepare` loads, each with the dynamic shared memory it allows (host
    arithmetic only): every configuration the planner may pick for ``weight`` at ``block_m`` (or
    ``config``), with ``activation`` also those that fuse it and the SiLU-and-mul of a second step,
    with ``topk_sum`` the sum of :func:`gemm_topk_sum`, with ``block_rows`` the tensor-copy twins
    (routing blocks as consecutive rows: the grouped modes, or the rows of an ``out_position``
    output), each in the one-fma form where the weight's scales allow it."""
    check_block_m(block_m, arch)
    if config is not None and config.block_m != block_m:
        raise ChordInputError(f"config: its block_m {config.block_m} differs from block_m={block_m}")
    found: dict[CudaKernel, int] = {}
    for planned in (config,) if config is not None else configs_for(weight.n, weight.k, block_m, arch):
        cfg = _tma_rows_twin(planned) if block_rows else planned
        fused = silu_mul_twin(cfg, weight.n) if activation else None
        for launched in (weight_config(c, weight) for c in ((cfg,) if fused is None else (cfg, fused))):
            found[launched.kernel()] = launched.per_cta_budget()  # every plan's smem fits the budget
    if activation:
        found[silu_and_mul_kernel()] = 0  # where the decode kernel runs, SiLU-and-mul is a second launch
    if topk_sum:
        found[local_topk_sum_kernel()] = 0
    return found


def layer_kernels(w13: PackedWeight, w2: PackedWeight, arch: str, *, masked: bool = False) -> dict[CudaKernel, int]:
    """The GEMM and activation kernels a layer on these weights may launch (as :func:`prepared_kernels`)
    at every block size :func:`layer_block_m` may pick: :func:`fused_moe` and :func:`moe_experts`'s —
    gate_up with SiLU-and-mul (its output by slot or in routing order: the same kernels) and the down
    with the top-k sum, from rows by slot or, where both GEMMs run on the WGMMA kernel, in routing
    order; ``masked``, those of both GEMMs through :func:`gemm_masked` instead (DeepEP low-latency
    buffers: tensor copies, no top-k sum)."""
    found: dict[CudaKernel, int] = {}
    for block_m in block_ms_for(w13):
        found |= prepared_kernels(w13, block_m, arch, activation="silu", block_rows=masked)
        for block_rows in (True,) if masked else (False, True):
            found |= prepared_kernels(w2, block_m, arch, topk_sum=not masked, block_rows=block_rows)
    return found


def prepare_layer(w13: PackedWeight, w2: PackedWeight, device: torch.device | str | int | None = None, *,
                  masked: bool = False) -> None:
    """Compile and load every kernel a layer on these weights may launch, whatever the batch
    (:func:`layer_kernels`, and the routing's where it is not ``masked``), and allocate the default
    workspace of ``device``'s current stream: call it once before CUDA-graph capture (or before
    serving, so that no first batch of a new size waits for a compile)."""
    dev = hardware.cuda_device(device)
    if torch.cuda.is_current_stream_capturing():
        raise ChordInputError("prepare_layer() loads kernels and allocates memory: call it before CUDA-graph capture")
    num_sms, arch = hardware.num_sms(dev.index), hardware.arch(dev.index)
    kernels = layer_kernels(w13, w2, arch, masked=masked)
    compile_all([*kernels, *(() if masked else align_kernels(arch))], arch)  # one pool of nvcc processes for all
    for kernel, smem in kernels.items():
        kernel.prepare(dev, smem=smem)
    if not masked:
        prepare_align(dev)
    reserve = max(shape_workspace_bytes(w.n, w.k, BLOCK_MS, num_sms, arch) for w in (w13, w2))
    default_workspace(reserve, dev, torch.cuda.current_stream(dev), reserve=reserve)


def check_layer(hidden: torch.Tensor, w13: PackedWeight, w2: PackedWeight, topk_weights: torch.Tensor,
                topk_ids: torch.Tensor, expert_map: torch.Tensor | None, *, what: str) -> None:
    """Refuse a layer's inputs that :func:`fused_moe` and :func:`moe_experts` cannot run (metadata
    only: no device read), before anything is launched."""
    require_tensor("hidden", hidden, dtype=torch.bfloat16, ndim=2, device="cuda", contiguous=True)
    require_tensor("topk_ids", topk_ids, dtype=(torch.int32, torch.int64), ndim=2, device=hidden.device)
    require_tensor("topk_weights", topk_weights, dtype=(torch.float32, torch.bfloat16),
                   shape=tuple(topk_ids.shape), device=hidden.device)
    if expert_map is not None:
        require_tensor("expert_map", expert_map, dtype=(torch.int32, torch.int64), ndim=1, device=hidden.device)
    if topk_ids.shape[0] != hidden.shape[0]:
        raise ChordInputError(f"topk_ids: expected {hidden.shape[0]} rows to match hidden, got {topk_ids.shape[0]}")
    check_weight(w13, hidden.device, what=what)
    check_weight(w2, hidden.device, what=what)
    if w13.num_experts != w2.num_experts:
        raise ChordInputError(f"w13 has {w13.num_experts} experts but w2 has {w2.num_experts}")
    if w13.k != hidden.shape[1] or w2.n != hidden.shape[1] or w13.n != 2 * w2.k:
        raise ChordInputError(
            f"expected w13 [E, 2I, H] and w2 [E, H, I] with H={hidden.shape[1]}, got w13 "
            f"[{w13.num_experts}, {w13.n}, {w13.k}] and w2 [{w2.num_experts}, {w2.n}, {w2.k}]"
        )


def fused_moe(
    hidden: torch.Tensor,
    w13: PackedWeight,
    w2: PackedWeight,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
    *,
    global_num_experts: int | None = None,
    expert_map: torch.Tensor | None = None,
    workspace: torch.Tensor | None = None,
) -> torch.Tensor:
    """A whole MoE layer: align -> gate_up with SiLU-and-mul (fused into the kernel's epilogue where
    ``planner.silu_mul_twin`` has a configuration) -> down x top-k weight with the top-k sum
    (:func:`gemm_topk_sum`). Rows of non-local slots are never written.

    ``w13`` is ``[E, 2I, H]`` (gate rows then up rows), ``w2`` is ``[E, H, I]``, both packed with
    the indexed layout. With ``expert_map`` (global id -> local id or -1) only local experts
    contribute. Returns bf16 ``[M, H]`` (``M`` may be 0), matching
    :func:`chord_kernels.reference.moe_layer`. ``workspace`` serves both GEMMs (see :func:`gemm`).
    The routing is :func:`~chord_kernels.routing.align_block_size` (CUDA kernels). Before CUDA-graph
    capture, call it once eagerly, or :func:`prepare` both weights and ``ops.align.prepare``.
    """
    check_layer(hidden, w13, w2, topk_weights, topk_ids, expert_map, what="chord_kernels.indexed.fused_moe")
    num_experts = global_num_experts if global_num_experts is not None else w13.num_experts
    if expert_map is None and num_experts != w13.num_experts:
        raise ChordInputError(
            f"global_num_experts={num_experts} differs from the {w13.num_experts} packed experts; "
            "pass expert_map for expert parallelism"
        )
    m, top_k = topk_ids.shape
    local_slots = math.ceil(m * top_k * w13.num_experts / max(1, num_experts))
    block_m = layer_block_m(w13, w2, local_slots)
    routing = align_block_size(topk_ids, block_m, num_experts, expert_map)
    args = (routing.sorted_token_ids, routing.expert_ids, routing.num_tokens_post_padded)
    return _experts(hidden, w13, w2, args, topk_weights, topk_ids, block_m, expert_map, workspace, None)


def routing_order_rows(w13: PackedWeight, w2: PackedWeight, routing: Routing, block_m: int,
                       device: torch.device, tok_e: float | None = None) -> int:
    """Rows of the gate_up output in routing order (``num_blocks * block_m``) where both GEMMs of
    a layer on ``routing`` (``tok_e`` expected rows per expert, as :func:`gemm` takes it) run on
    the WGMMA kernel, which :func:`moe_experts` then uses; 0 where the activation stays in slot
    order. From shapes only (no device read)."""
    capacity = routing_capacity(routing[0], routing[1], block_m)
    if capacity == 0 or device.type != "cuda":
        return 0
    num_sms, arch = hardware.num_sms(device.index), hardware.arch(device.index)
    return capacity * block_m if both_on_wgmma(w13, w2, block_m, capacity, num_sms, arch, tok_e) else 0


def both_on_wgmma(w13: PackedWeight, w2: PackedWeight, block_m: int, capacity: int, num_sms: int, arch: str,
                  tok_e: float | None = None) -> bool:
    """Whether both GEMMs of a layer on ``capacity`` routing blocks run on the WGMMA kernel (host
    arithmetic only): then :func:`moe_experts` keeps its activation in routing order."""
    return all(isinstance(launch_plan(w, block_m, capacity, num_sms, arch, tok_e=tok_e).config, WgmmaConfig)
               for w in (w13, w2))


def moe_experts(
    hidden: torch.Tensor,
    w13: PackedWeight,
    w2: PackedWeight,
    routing: Routing,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
    *,
    block_m: int,
    expert_map: torch.Tensor | None = None,
    workspace: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """The experts of :func:`fused_moe` on routing tensors already built at ``block_m`` (one routing
    for both GEMMs): gate_up with SiLU-and-mul, then down x top-k weight with the top-k sum ->
    bf16 ``[M, H]``. Where both GEMMs run on the WGMMA kernel, gate_up writes its rows in routing
    order (``gemm(..., out_position)``) and down loads them block by block with tensor copies
    instead of gathering them row by row; elsewhere the activation is in slot order."""
    check_layer(hidden, w13, w2, topk_weights, topk_ids, expert_map, what="chord_kernels.indexed.moe_experts")
    return _experts(hidden, w13, w2, routing, topk_weights, topk_ids, block_m, expert_map, workspace, out)


def _experts(hidden: torch.Tensor, w13: PackedWeight, w2: PackedWeight, routing: Routing, topk_weights: torch.Tensor,
             topk_ids: torch.Tensor, block_m: int, expert_map: torch.Tensor | None, workspace: torch.Tensor | None,
             out: torch.Tensor | None) -> torch.Tensor:
    """:func:`moe_experts` on inputs :func:`check_layer` passed (``fused_moe`` checks them once)."""
    global_experts = expert_map.numel() if expert_map is not None else w13.num_experts
    tok_e = topk_ids.numel() / max(1, global_experts)
    in_order = routing_order_rows(w13, w2, routing, block_m, hidden.device, tok_e) > 0
    act = run_gemm(hidden, w13, routing, block_m=block_m, top_k=topk_ids.shape[1], workspace=workspace,
                   activation="silu", zero_nonlocal=False, out_position=in_order, tok_e=tok_e)
    return gemm_topk_sum(act, w2, *routing, topk_weights, topk_ids, block_m=block_m, expert_map=expert_map, out=out,
                         workspace=workspace, routing_order=in_order)
