"""Indexed W4A16 MoE GEMM (decode kernel) and a whole MoE layer on top of it.

``gemm`` reads vLLM routing tensors directly (``sorted_token_ids`` with sentinel ``num_slots``,
``expert_ids`` with -1 for non-local experts, ``num_tokens_post_padded`` on the device): no host
synchronization, no allocation beyond the output, so it can be captured in a CUDA graph once its
kernel is compiled (call :func:`prepare` or run it once before capture).
"""

from __future__ import annotations

import dataclasses
import functools
import math

import torch

from chord_kernels.checks import require_tensor
from chord_kernels.errors import ChordInputError, ChordLayoutError
from chord_kernels.indexed.heuristics import (
    BLOCK_MS,
    WGMMA_PROFILES,
    WIDE_BLOCKS,
    DecodeConfig,
    choose_block_m,
    choose_config,
    choose_schedule,
    general_config,
    grid_size,
    ntiles,
)
from chord_kernels.indexed.layout import ATOM_WORDS, LAYOUT_VERSION, PROFILES
from chord_kernels.indexed.wgmma import SMEM_LIMIT as _SMEM_LIMIT
from chord_kernels.indexed.wgmma import WgmmaConfig, choose_wgmma_config, wgmma_kernel
from chord_kernels.jit import CudaKernel, i32, register_precompile
from chord_kernels.packed import PackedWeight
from chord_kernels.reference import silu_and_mul
from chord_kernels.routing import align_block_size

PROFILE_ARCHS: dict[str, tuple[str, ...]] = {
    "h200_ep8": ("sm_90a",),
    "h200_tp8": ("sm_90a",),
    "b200_ep8": ("sm_100a",),
    "b300_ep8": ("sm_103a",),
}
"""Architectures whose kernels a profile's heuristics were written for."""
LIST_CAP_LIMIT = 8192
"""Largest routing-block count compacted in shared memory; beyond it the kernel walks all blocks."""

_SOURCE = r"""
#include "chord/indexed/decode.cuh"

using Cfg = chord::indexed::DecodeConfig<{template_args}>;

extern "C" __global__ void __launch_bounds__(Cfg::kThreads, {min_blocks}) chord_indexed_decode(
    const int32_t* __restrict__ tiles, const __nv_bfloat16* __restrict__ a, __nv_bfloat16* out,
    const int32_t* __restrict__ sorted_token_ids, const int32_t* __restrict__ expert_ids,
    const int32_t* __restrict__ num_tokens_post_padded, const float* __restrict__ topk_weights,
    int32_t* counters, float* partials, int32_t* flags, int n, int k, int num_experts, int num_slots, int top_k, int num_blocks,
    int list_cap) {{
  const chord::indexed::DecodeArgs args{{tiles, a, out, sorted_token_ids, expert_ids,
                                         num_tokens_post_padded, topk_weights, counters, partials,
                                         flags, n, k,
                                         num_experts, num_slots, top_k, num_blocks, list_cap}};
  chord::indexed::decode_kernel<Cfg>(args);
}}
"""


@functools.cache
def decode_kernel(config: DecodeConfig, arch: str | None = None) -> CudaKernel:
    """The JIT kernel of one configuration (compiled on first launch or :meth:`compile`)."""
    source = _SOURCE.format(template_args=config.template_args(), min_blocks=config.ctas_per_sm)
    return CudaKernel(name="indexed_decode", source=source, entry="chord_indexed_decode", arch=arch)


# Shapes of the Kimi K2.x profiles (N, K) for gate_up and down, EP8 and TP8.
_KIMI_SHAPES = ((4096, 7168), (7168, 2048), (512, 7168), (7168, 256))


def default_configs() -> list[DecodeConfig]:
    """Configurations the Kimi shapes dispatch to (what ``precompile`` warms)."""
    seen: dict[DecodeConfig, None] = {}
    for bm in BLOCK_MS:
        for n, k in _KIMI_SHAPES:
            seen.update(dict.fromkeys(_schedules(choose_config(n, k, bm))))
        seen[general_config(bm)] = None
    return list(seen)


def _schedules(cfg: DecodeConfig) -> list[DecodeConfig]:
    """A configuration and the strided twin ``choose_schedule`` may switch it to."""
    return [cfg, dataclasses.replace(cfg, schedule="strided")] if cfg.schedule == "balanced" else [cfg]


def default_wgmma_configs() -> list[WgmmaConfig]:
    """WGMMA configurations the Kimi shapes dispatch to on sm_90a (every tile choose_block_m picks)."""
    blocks = [*range(32, 88, 8), *WIDE_BLOCKS]
    return list(dict.fromkeys(choose_wgmma_config(n, k, bm) for bm in blocks for n, k in _KIMI_SHAPES))


register_precompile("indexed", lambda: [*(decode_kernel(c) for c in default_configs()),
                                        *(wgmma_kernel(c) for c in default_wgmma_configs())])


@functools.cache
def _counters(device: torch.device) -> torch.Tensor:
    return torch.zeros(2, dtype=torch.int32, device=device)


@functools.cache
def _workspace(device: torch.device, ctas: int, warps: int, partial_floats: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Split-K partials (two slots per CTA and warp: the part at the start and at the end of its
    range) and the split items' arrival counters for the balanced schedule (``ctas`` CTAs at most).
    The kernel leaves every counter zero, so one zeroed buffer serves all launches of a stream; like
    the dynamic counters it is per device, not for concurrent launches on several streams."""
    partials = torch.empty(2 * ctas * partial_floats, dtype=torch.float32, device=device)
    flags = torch.zeros(ctas * warps, dtype=torch.int32, device=device)
    return partials, flags


def _workspace_for(cfg: DecodeConfig, device: torch.device) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    if cfg.schedule != "balanced":
        return None, None
    return _workspace(device, _num_sms(_device_index(device)) * cfg.ctas_per_sm, cfg.warps, cfg.partial_floats)


def _device_index(device: torch.device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()


@functools.cache
def _num_sms(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def _device_arch(device: torch.device) -> str:
    from chord_kernels.jit.nvcc import arch_of_capability

    return arch_of_capability(*torch.cuda.get_device_capability(device))


def check_weight(weight: PackedWeight, device: torch.device | None = None) -> PackedWeight:
    """Refuse anything but an indexed-layout weight packed for this GPU's profiles."""
    if not isinstance(weight, PackedWeight):
        raise ChordLayoutError(
            f"weight: expected a PackedWeight from chord_kernels.pack('indexed', ...), got "
            f"{type(weight).__name__}"
        )
    weight.require(family="indexed", mode="indexed", profile=PROFILES, layout_version=LAYOUT_VERSION,
                   what="chord_kernels.indexed.gemm")
    tiles = weight.tensors.get("tiles")
    n16, kg = math.ceil(weight.n / 16), weight.k // 32
    require_tensor("weight.tiles", tiles, dtype=torch.int32,
                   shape=(weight.num_experts, n16 * kg, ATOM_WORDS), contiguous=True)
    if device is not None and device.type == "cuda":
        arch = _device_arch(device)
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
    config: DecodeConfig | WgmmaConfig | None = None,
) -> torch.Tensor:
    """One indexed MoE GEMM -> bf16 ``[a.shape[0] * top_k, N]``; see
    :func:`chord_kernels.reference.indexed_gemm` for the semantics.

    Slot ``t`` reads row ``t // top_k`` of ``a``; rows of slots in blocks whose expert is -1
    (non-local) are zero; sentinel entries are skipped. ``topk_weights`` (``[rows, top_k]`` or flat,
    fp32 or bf16) multiplies each slot's fp32 accumulator. ``config`` overrides the heuristics.
    """
    require_tensor("a", a, dtype=torch.bfloat16, ndim=2, device="cuda", contiguous=True)
    device = a.device
    check_weight(weight, device)
    tiles = weight.tensors["tiles"]
    if tiles.device != device:
        raise ChordInputError(f"weight: expected tensors on {device} (like a), got {tiles.device}")
    if a.shape[1] != weight.k:
        raise ChordInputError(f"a: expected K={weight.k} columns to match the weight, got {a.shape[1]}")
    require_tensor("sorted_token_ids", sorted_token_ids, dtype=torch.int32, ndim=1, device=device,
                   contiguous=True)
    require_tensor("expert_ids", expert_ids, dtype=torch.int32, ndim=1, device=device, contiguous=True)
    require_tensor("num_tokens_post_padded", num_tokens_post_padded, dtype=torch.int32, shape=(1,),
                   device=device)
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k <= 0:
        raise ChordInputError(f"top_k: expected a positive integer, got {top_k!r}")
    if weight.num_experts >= 1 << 16:
        raise ChordInputError(f"weight: at most 65535 experts are supported, got {weight.num_experts}")
    wgmma_ok = weight.profile in WGMMA_PROFILES
    if block_m not in BLOCK_MS and not ((wgmma_ok or isinstance(config, WgmmaConfig)) and _wgmma_block(block_m)):
        raise ChordInputError(
            f"block_m: expected one of {list(BLOCK_MS)}"
            + (" or a multiple of 8 up to 256 (the sm_90a WGMMA kernel)" if wgmma_ok else "")
            + f", got {block_m!r}")
    if config is not None and config.block_m != block_m:
        raise ChordInputError(f"config: its block_m {config.block_m} differs from block_m={block_m}")
    num_slots = a.shape[0] * top_k
    if num_slots >= 1 << 31:
        raise ChordInputError(f"a.shape[0] * top_k = {num_slots} slots exceed int32")
    weights_flat = None
    if topk_weights is not None:
        require_tensor("topk_weights", topk_weights, dtype=(torch.float32, torch.bfloat16), device=device)
        if topk_weights.numel() != num_slots:
            raise ChordInputError(f"topk_weights: expected {num_slots} weights, got {topk_weights.numel()}")
        weights_flat = topk_weights.reshape(-1).float().contiguous()
    shape = (num_slots, weight.n)
    if out is None:
        out = torch.empty(shape, dtype=torch.bfloat16, device=device)
    else:
        require_tensor("out", out, dtype=torch.bfloat16, shape=shape, device=device, contiguous=True)
    if num_slots == 0:
        return out
    _aligned16("a", a)
    _aligned16("out", out)
    num_blocks = min(expert_ids.numel(), sorted_token_ids.numel() // block_m)
    if num_blocks == 0:
        return out.zero_()
    num_sms = _num_sms(_device_index(device))
    cfg = config if config is not None else planned_config(weight, block_m, num_blocks, num_sms)
    if isinstance(cfg, WgmmaConfig):
        _launch_wgmma(cfg, tiles, a, out, sorted_token_ids, expert_ids, num_tokens_post_padded, weights_flat,
                      weight, num_slots, top_k, num_blocks, num_sms)
        return out
    list_cap = num_blocks if num_blocks <= LIST_CAP_LIMIT else 0
    smem = cfg.smem_bytes(list_cap)
    if smem > cfg.per_cta_budget():
        list_cap, smem = 0, cfg.smem_bytes(0)  # walk every block instead of compacting them
    max_items = num_blocks * ntiles(weight.n, cfg)
    grid = grid_size(cfg, num_sms, max_items)
    counters = _counters(device) if cfg.dynamic else None
    partials, flags = _workspace_for(cfg, device)
    decode_kernel(cfg).launch(
        (grid,), (cfg.threads,),
        (tiles, a, out, sorted_token_ids, expert_ids, num_tokens_post_padded, weights_flat, counters,
         partials, flags, i32(weight.n), i32(weight.k), i32(weight.num_experts), i32(num_slots), i32(top_k),
         i32(num_blocks), i32(list_cap)),
        smem=smem,
    )
    return out


def _wgmma_block(block_m: int) -> bool:
    return isinstance(block_m, int) and block_m % 8 == 0 and 8 <= block_m <= 256


def _launch_wgmma(cfg: WgmmaConfig, tiles: torch.Tensor, a: torch.Tensor, out: torch.Tensor,
                  sorted_token_ids: torch.Tensor, expert_ids: torch.Tensor, num_tokens_post_padded: torch.Tensor,
                  weights_flat: torch.Tensor | None, weight: PackedWeight, num_slots: int, top_k: int,
                  num_blocks: int, num_sms: int) -> None:
    list_cap = num_blocks if num_blocks <= LIST_CAP_LIMIT else 0
    if cfg.smem_bytes(list_cap) > _SMEM_LIMIT:
        list_cap = 0  # walk every block instead of compacting them
    ntiles_n = math.ceil(math.ceil(weight.n / 16) / (cfg.block_n // 16))
    grid = max(1, min(num_sms, num_blocks * ntiles_n))
    wgmma_kernel(cfg).launch(
        (grid,), (cfg.threads,),
        (tiles, a, out, sorted_token_ids, expert_ids, num_tokens_post_padded, weights_flat, None, None, None,
         i32(weight.n), i32(weight.k), i32(weight.num_experts), i32(num_slots), i32(top_k), i32(num_blocks),
         i32(list_cap)),
        smem=cfg.smem_bytes(list_cap),
    )


def planned_config(weight: PackedWeight, block_m: int, num_blocks: int, num_sms: int) -> DecodeConfig | WgmmaConfig:
    """The configuration ``gemm`` launches for ``num_blocks`` routing blocks (the routing tensors'
    capacity, known without a device read) on a GPU with ``num_sms`` SMs."""
    return _planned_config(weight.n, weight.k, block_m, num_blocks, num_sms, weight.profile in WGMMA_PROFILES)


@functools.lru_cache(maxsize=1024)
def _planned_config(n: int, k: int, block_m: int, num_blocks: int, num_sms: int,
                    wgmma: bool) -> DecodeConfig | WgmmaConfig:
    # Memoized: it runs on every eager call, and the routing capacity repeats from step to step.
    if wgmma and block_m > 16:  # the WGMMA kernel wins from 24-token blocks up (docs/optimization.md)
        return choose_wgmma_config(n, k, block_m)
    cfg = choose_config(n, k, block_m)
    list_cap = num_blocks if num_blocks <= LIST_CAP_LIMIT else 0
    if cfg.smem_bytes(list_cap) > cfg.per_cta_budget():
        return general_config(block_m)  # shallower stages leave room for the block list
    return choose_schedule(cfg, num_blocks * ntiles(n, cfg), num_sms)


def prepare(weight: PackedWeight, block_m: int, device: torch.device | str | None = None) -> None:
    """Compile and load the kernel ``gemm`` will use (do this before CUDA-graph capture)."""
    dev = torch.device(device or "cuda")
    if dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    if weight.profile in WGMMA_PROFILES and block_m > 16:
        wgmma_kernel(choose_wgmma_config(weight.n, weight.k, block_m)).prepare(dev)
        return
    for cfg in {*_schedules(choose_config(weight.n, weight.k, block_m)), general_config(block_m)}:
        decode_kernel(cfg).prepare(dev)
        if cfg.dynamic:
            _counters(dev)
        _workspace_for(cfg, dev)


def fused_moe(
    hidden: torch.Tensor,
    w13: PackedWeight,
    w2: PackedWeight,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
    *,
    global_num_experts: int | None = None,
    expert_map: torch.Tensor | None = None,
) -> torch.Tensor:
    """A whole MoE layer: align -> gate_up -> SiLU-and-mul -> down (x top-k weight) -> top-k sum.

    ``w13`` is ``[E, 2I, H]`` (gate rows then up rows), ``w2`` is ``[E, H, I]``, both packed with
    the indexed layout. With ``expert_map`` (global id -> local id or -1) only local experts
    contribute. Returns bf16 ``[M, H]``, matching :func:`chord_kernels.reference.moe_layer`.
    """
    require_tensor("hidden", hidden, dtype=torch.bfloat16, ndim=2, device="cuda", contiguous=True)
    require_tensor("topk_ids", topk_ids, dtype=(torch.int32, torch.int64), ndim=2, device=hidden.device)
    require_tensor("topk_weights", topk_weights, dtype=(torch.float32, torch.bfloat16),
                   shape=tuple(topk_ids.shape), device=hidden.device)
    if topk_ids.shape[0] != hidden.shape[0]:
        raise ChordInputError(f"topk_ids: expected {hidden.shape[0]} rows to match hidden, got {topk_ids.shape[0]}")
    check_weight(w13, hidden.device)
    check_weight(w2, hidden.device)
    if w13.num_experts != w2.num_experts:
        raise ChordInputError(f"w13 has {w13.num_experts} experts but w2 has {w2.num_experts}")
    if w13.k != hidden.shape[1] or w2.n != hidden.shape[1] or w13.n != 2 * w2.k:
        raise ChordInputError(
            f"expected w13 [E, 2I, H] and w2 [E, H, I] with H={hidden.shape[1]}, got w13 "
            f"[{w13.num_experts}, {w13.n}, {w13.k}] and w2 [{w2.num_experts}, {w2.n}, {w2.k}]"
        )
    num_experts = global_num_experts if global_num_experts is not None else w13.num_experts
    if expert_map is None and num_experts != w13.num_experts:
        raise ChordInputError(
            f"global_num_experts={num_experts} differs from the {w13.num_experts} packed experts; "
            "pass expert_map for expert parallelism"
        )
    m, top_k = topk_ids.shape
    local_slots = math.ceil(m * top_k * w13.num_experts / max(1, num_experts))
    block_m = min(choose_block_m(w13, local_slots), choose_block_m(w2, local_slots))  # one routing for both
    routing = align_block_size(topk_ids, block_m, num_experts, expert_map)
    args = (routing.sorted_token_ids, routing.expert_ids, routing.num_tokens_post_padded)
    gate_up = gemm(hidden, w13, *args, block_m=block_m, top_k=top_k)
    act = silu_and_mul(gate_up)
    down = gemm(act, w2, *args, block_m=block_m, top_k=1, topk_weights=topk_weights)
    return down.reshape(m, top_k, -1).float().sum(dim=1).to(torch.bfloat16)
