"""The one planning step of an indexed GEMM: which kernel, which configuration, how to launch it.

:func:`plan` maps (N, K, block_m, routing capacity, SM count, architecture) to a
:class:`LaunchPlan` (kernel configuration, grid, dynamic shared memory, routing-block list
length, workspace layout). It reads no device memory, so it is safe during CUDA-graph capture,
and it is memoized: the routing capacity (the blocks the routing tensors can hold, known from
their shapes) repeats from step to step. ``gemm``, ``prepare``, the tests and the benchmark use
this same function; ``gemm(..., config=...)`` overrides the choice of configuration only.

Kernels plug in here: a kernel of the indexed family brings a configuration class (with
``block_m``, ``threads``, ``ctas_per_sm``, ``smem_bytes``, ``per_cta_budget``, ``ntiles``,
``workspace`` and ``kernel`` like :class:`~chord_kernels.indexed.decode.DecodeConfig`), a
branch in :func:`_choose` and its configurations in :func:`configs_for`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch

from chord_kernels import hardware
from chord_kernels.checks import require_int
from chord_kernels.errors import ChordInputError, ChordUnsupportedError
from chord_kernels.indexed.decode import BLOCK_MS, LIST_CAP_LIMIT, DecodeConfig
from chord_kernels.indexed.heuristics import (
    WGMMA_BLOCK_MS,
    WIDE16_BLOCK,
    WIDE_BLOCK,
    WIDE_MIN_TOK_E,
    choose_config,
    choose_schedule,
    general_config,
    short_k_config,
)
from chord_kernels.indexed.wgmma import ARCH as WGMMA_ARCH
from chord_kernels.indexed.wgmma import WgmmaConfig, choose_wgmma_config, wide16_config
from chord_kernels.indexed.workspace import WorkspaceLayout
from chord_kernels.jit import DEFAULT_ARCH, SUPPORTED_ARCHS, CudaKernel, distinct_sources
from chord_kernels.packed import PackedWeight

KernelConfig = DecodeConfig | WgmmaConfig
"""Configurations the planner can return (the union grows with each kernel of the family)."""
WGMMA_MIN_BLOCK_M = 24
"""From 24-token blocks up the WGMMA kernel beats the decode kernel on sm_90a (docs/optimization.md)."""
WGMMA_BLOCK16_MIN_K = 2048
"""16-token blocks run on the WGMMA kernel from this K on (sm_90a; except, where N has the decode
kernel's wide tiles, below :data:`WIDE_BLOCK16_MAX_K` and up to :data:`DECODE_BLOCK16_MAX_TOK_E` rows
per expert): 6-13 % faster than the decode kernel at 5-8 rows per expert on Kimi's
EP8 GEMMs and TP8's gate_up (K = 2048 and 7168), 24 % slower on TP8's down (K = 256: one stage per
item; docs/optimization.md, session 10)."""
WIDE_BLOCK16_MAX_K = 4096
"""Below this K, 16-token blocks with the decode kernel's wide tiles (N from
:data:`~chord_kernels.indexed.heuristics.SHORT_K_WIDE_MIN_N`) run there, with row widths: EP8's down
(K = 2048) 6-16 % faster alone than on the WGMMA kernel at 3.6-9 rows per expert, its layer 1-2 %
(docs/optimization.md, session 35: the decode kernel's one-fma form, wide tiles and row widths came
after session 10's measurement). Kimi's gate_up (K = 7168, whose SiLU-and-mul the WGMMA kernel fuses)
stays on the WGMMA kernel above :data:`DECODE_BLOCK16_MAX_TOK_E` rows per expert."""
DECODE_BLOCK16_MAX_TOK_E = 8.0
"""Up to this many expected rows per expert, 16-token blocks from :data:`WIDE_BLOCK16_MAX_K` on
(Kimi's gate_up, K = 7168) run the decode kernel's wide tiles with row widths and SiLU-and-mul fused
in pairs of gate and up warps: the GEMM 6-13 % faster than the WGMMA kernel's at 3.6-5 rows per
expert, 2-8 % at 6-8, level at 8.5-9; the layer 4-8 % faster at 3.6-5 rows (EP8 and DeepEP low
latency), 1-6 % at 6, 0-4 % at 6.5-7, level at 7.5-9 (docs/optimization.md, sessions 35 and 39)."""


@dataclass(frozen=True)
class LaunchPlan:
    """Everything a launch of an indexed kernel needs besides the tensors."""

    config: KernelConfig
    """The kernel and its configuration."""
    capacity: int
    """Routing blocks the routing tensors can hold (the kernel's ``num_blocks``)."""
    grid: int
    """CTAs to launch."""
    smem: int
    """Dynamic shared memory per CTA, in bytes."""
    list_cap: int
    """Routing blocks compacted in shared memory (0: the kernel walks every block)."""
    workspace: WorkspaceLayout
    """Counters and split-K partials the launch needs (see :mod:`~chord_kernels.indexed.workspace`)."""

    @property
    def threads(self) -> int:
        return self.config.threads

    @property
    def workspace_bytes(self) -> int:
        """Bytes of workspace this launch needs (0: none)."""
        return self.workspace.nbytes

    def launch(self, args: object, device: torch.device, stream: torch.cuda.Stream) -> None:
        """Launch the planned kernel with its packed argument struct (``indexed.args.ARGS``)."""
        self.config.kernel().launch((self.grid,), (self.threads,), (args,), smem=self.smem,
                                    stream=stream, device=device)


def routing_capacity(sorted_token_ids: torch.Tensor, expert_ids: torch.Tensor, block_m: int) -> int:
    """Routing blocks the tensors can hold (from their shapes: no device read)."""
    return min(expert_ids.numel(), sorted_token_ids.numel() // block_m)


def _device_facts(device: torch.device | str | int | None, num_sms: int | None,
                  arch: str | None) -> tuple[int, str]:
    if arch is not None and arch not in SUPPORTED_ARCHS:
        raise ChordUnsupportedError(f"arch: expected one of {list(SUPPORTED_ARCHS)}, got {arch!r}")
    if num_sms is not None:
        require_int("num_sms", num_sms, minimum=1)
    if num_sms is not None and arch is not None:
        return num_sms, arch
    index = hardware.cuda_device(device).index
    return (num_sms if num_sms is not None else hardware.num_sms(index),
            arch if arch is not None else hardware.arch(index))


def check_block_m(block_m: object, arch: str | None = None) -> int:
    """``block_m`` must be a block size some indexed kernel is built for: the decode kernel's
    :data:`BLOCK_MS` everywhere, any multiple of 8 up to 256 on sm_90a (the WGMMA kernel); with
    ``arch`` None, whichever some architecture supports."""
    wgmma = arch in (None, WGMMA_ARCH)
    ok = not isinstance(block_m, bool) and isinstance(block_m, int) and (
        block_m in BLOCK_MS or (wgmma and block_m % 8 == 0 and 8 <= block_m <= 256))
    if not ok:
        extra = " or a multiple of 8 up to 256 on sm_90a (the WGMMA kernel)" if wgmma else f" on {arch}"
        raise ChordInputError(f"block_m: expected one of {list(BLOCK_MS)}{extra}, got {block_m!r}")
    return block_m  # type: ignore[return-value]


def plan(
    weight: PackedWeight,
    *,
    block_m: int,
    capacity: int,
    num_sms: int | None = None,
    arch: str | None = None,
    config: KernelConfig | None = None,
    device: torch.device | str | int | None = None,
    tok_e: float | None = None,
) -> LaunchPlan:
    """The launch ``gemm`` makes for ``weight`` with routing tensors holding ``capacity`` blocks of
    ``block_m`` tokens (:func:`routing_capacity`) and ``tok_e`` expected rows per expert (``gemm``'s
    argument; where None, the shape's default configuration). ``num_sms`` and ``arch`` default to
    those of ``device`` (the current CUDA device); give both to plan without a GPU. ``config`` fixes
    the configuration instead of the heuristics."""
    check_block_m(block_m)
    if config is not None and config.block_m != block_m:
        raise ChordInputError(f"config: its block_m {config.block_m} differs from block_m={block_m}")
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 0:
        raise ChordInputError(f"capacity: expected a non-negative number of routing blocks, got {capacity!r}")
    num_sms, arch = _device_facts(device, num_sms, arch)
    check_block_m(block_m, arch)
    if config is None and tok_e is not None:
        config = config_for_rows(weight.n, weight.k, block_m, arch, tok_e)
    return plan_for_weight(cached_plan(weight.n, weight.k, block_m, capacity, num_sms, arch, config), weight)


def weight_config(config: KernelConfig, weight: PackedWeight) -> KernelConfig:
    """``config`` as it runs on ``weight``: dequantizing with one fma per pair of weights
    (``subnormal``, the same bits) where the weight's scales allow it (``PackedWeight.small_scales``);
    a configuration asking for it on other weights is refused."""
    if config.subnormal and not weight.small_scales:
        raise ChordInputError(f"config: {config} dequantizes with the one-fma form, exact only for scales below "
                              f"2^-5 in magnitude; {weight.describe()} has larger (or unchecked) scales")
    return _subnormal_twin(config) if weight.small_scales else config


@functools.lru_cache(maxsize=1024)
def _subnormal_twin(config: KernelConfig) -> KernelConfig:
    # Interleaved against the two-instruction form, the same bits: most GEMMs 2-6 % faster, none
    # slower beyond the runs' spread (docs/optimization.md, session 30).
    return config if config.subnormal else dataclasses.replace(config, subnormal=True)


def plan_for_weight(launch: LaunchPlan, weight: PackedWeight) -> LaunchPlan:
    """``launch`` with :func:`weight_config`'s configuration (its grid, shared memory and workspace
    are the same)."""
    config = weight_config(launch.config, weight)
    return launch if config is launch.config else _subnormal_plan(launch)


@functools.lru_cache(maxsize=4096)
def _subnormal_plan(launch: LaunchPlan) -> LaunchPlan:
    return dataclasses.replace(launch, config=_subnormal_twin(launch.config))


@functools.lru_cache(maxsize=4096)
def cached_plan(n: int, k: int, block_m: int, capacity: int, num_sms: int, arch: str,
                config: KernelConfig | None) -> LaunchPlan:
    """:func:`plan` on checked arguments (what ``gemm`` calls on every launch)."""
    return _launch(config or _choose(n, k, block_m, capacity, num_sms, arch), n, capacity, num_sms)


def _uses_wgmma(n: int, k: int, block_m: int, arch: str) -> bool:
    return arch == WGMMA_ARCH and (block_m >= WGMMA_MIN_BLOCK_M or (
        block_m == 16 and k >= WGMMA_BLOCK16_MIN_K and _short_k_config(n, k, block_m, arch) is None))


def _choose(n: int, k: int, block_m: int, capacity: int, num_sms: int, arch: str) -> KernelConfig:
    """The kernel configuration for a shape (the branch point of the family's kernels)."""
    if _uses_wgmma(n, k, block_m, arch):
        return _rows_config(n, k, block_m, None)
    wide = _short_k_config(n, k, block_m, arch)
    if wide is not None:
        return wide
    cfg = choose_config(n, k, block_m)
    list_cap = capacity if capacity <= LIST_CAP_LIMIT else 0
    if cfg.smem_bytes(list_cap) > cfg.per_cta_budget():
        return general_config(block_m)  # shallower stages leave room for the block list
    return choose_schedule(cfg, capacity * cfg.ntiles(n), num_sms)


LIST_ENTRY_BLOCKS = 1 << 16
"""List entries hold their block index in 16 bits: longer routing walks every block."""


def _list_cap(cfg: KernelConfig, capacity: int) -> int:
    """Routing blocks (decode kernel: all or none) or work items (WGMMA kernel: as many as fit;
    it walks the blocks when a launch's items outnumber them) listed in shared memory."""
    if isinstance(cfg, WgmmaConfig):
        fit = (cfg.per_cta_budget() - cfg.smem_bytes(0)) // 4
        return max(0, min(capacity, fit)) if capacity <= LIST_ENTRY_BLOCKS else 0
    if capacity <= LIST_CAP_LIMIT and cfg.smem_bytes(capacity) <= cfg.per_cta_budget():
        return capacity
    return 0  # walk every block instead of compacting them


def _launch(cfg: KernelConfig, n: int, capacity: int, num_sms: int) -> LaunchPlan:
    list_cap = _list_cap(cfg, capacity)
    smem = cfg.smem_bytes(list_cap)
    # Every SM filled, never more CTAs than possible work items; whole clusters.
    grid = max(cfg.cluster, min(num_sms * cfg.ctas_per_sm, capacity * cfg.ntiles(n)) // cfg.cluster * cfg.cluster)
    return LaunchPlan(cfg, capacity, grid, smem, list_cap, cfg.workspace(grid))


WGMMA_ONE_BLOCK_MIN_K = WGMMA_BLOCK16_MIN_K
"""The one-block WGMMA items of 24 (up to ``WIDE_MIN_TOK_E`` rows per expert) and 32 tokens run on
the WGMMA kernel from this K on; below, on the decode kernel, with ``short_k_config``'s wide tiles
as its own 16-token blocks there (``choose_config``'s for narrow N), except where the WGMMA kernel
takes them in runs of N tiles on four consumer warpgroups (32 tokens up to ``RUN_MAX_K``:
``RUN_FOUR_CONSUMER_TOKENS``). On TP8's down (K = 256) ``choose_config``'s tiles measured 8-9 %
(24-token blocks) and 4 % (32) faster than the WGMMA items, and ``short_k_config``'s took a further
6-13 % off (docs/optimization.md, sessions 18 and 19). Since session 71 the 32-token blocks take the
four-warpgroup runs with streamed output: against ``short_k_config``'s tiles, the same bits, TP8's down
0.8-5.2 % faster at 896-1152 tokens, its layer 0.3-2.6 %; at 24 tokens the layer within -1.1 to +1.9 % at
512-768 tokens (sessions 71 and 72), so they stay on the decode kernel."""
DECODE_ONE_BLOCK_MS = (WIDE_BLOCK, 32)
"""The block sizes of those items."""


def _rows_config(n: int, k: int, block_m: int, tok_e: float | None) -> KernelConfig:
    """:func:`choose_wgmma_config` for ``tok_e`` rows per expert, or the decode kernel's
    ``short_k_config`` for the one-block items of :data:`DECODE_ONE_BLOCK_MS` below
    :data:`WGMMA_ONE_BLOCK_MIN_K` that are not runs of N tiles on four consumer warpgroups."""
    cfg = choose_wgmma_config(n, k, block_m, tok_e)
    four_runs = bool(cfg.n_run) and cfg.consumers == 4
    if block_m in DECODE_ONE_BLOCK_MS and cfg.items == 1 and k < WGMMA_ONE_BLOCK_MIN_K and not four_runs:
        return short_k_config(n, block_m) or choose_config(n, k, block_m)
    return cfg


def _short_k_config(n: int, k: int, block_m: int, arch: str) -> KernelConfig | None:
    """``short_k_config`` for the decode kernel's own blocks below :data:`WIDE_BLOCK16_MAX_K` on
    sm_90a (16 tokens; 24 and 32 come through :func:`_rows_config`), else None."""
    return short_k_config(n, block_m) if arch == WGMMA_ARCH and k < WIDE_BLOCK16_MAX_K else None


def config_for_rows(n: int, k: int, block_m: int, arch: str, tok_e: float) -> KernelConfig | None:
    """The configuration :func:`plan` would pick knowing the expected rows per expert ``tok_e``,
    where that differs from its default (at 24-token blocks: items of one block, two for gate_up,
    up to ``WIDE_MIN_TOK_E`` rows, on the decode kernel below :data:`WGMMA_ONE_BLOCK_MIN_K`; the down
    GEMMs' seven-block wide items beyond ``WIDE_SEVEN_MIN_TOK_E``; at 16-token blocks the decode
    kernel's wide tiles up to :data:`DECODE_BLOCK16_MAX_TOK_E` rows, and beyond ``WIDE_MIN_TOK_E`` the
    WGMMA kernel's wide items of up to ten blocks, ``wide16_config``), else None. Only 16- and 24-token
    blocks depend on it: every other block size returns None at once (``gemm`` asks on every launch)."""
    if block_m == 16 and tok_e <= DECODE_BLOCK16_MAX_TOK_E and _uses_wgmma(n, k, block_m, arch):
        return short_k_config(n, block_m)  # None where N has no wide tiles
    if block_m == WIDE16_BLOCK and tok_e > WIDE_MIN_TOK_E and arch == WGMMA_ARCH:
        return wide16_config(n, k)
    if block_m != WIDE_BLOCK or not _uses_wgmma(n, k, block_m, arch):
        return None
    cfg = _rows_config(n, k, block_m, tok_e)
    return None if cfg == _rows_config(n, k, block_m, None) else cfg


@functools.lru_cache(maxsize=1024)
def configs_for(n: int, k: int, block_m: int, arch: str) -> tuple[KernelConfig, ...]:
    """Every configuration :func:`plan` may return for this shape, whatever the routing capacity
    and SM count (what ``prepare`` loads and ``precompile`` builds)."""
    check_block_m(block_m, arch)
    by_rows = [*filter(None, (config_for_rows(n, k, block_m, arch, tok_e) for tok_e in (0.0, math.inf)))]
    if _uses_wgmma(n, k, block_m, arch):
        found = [_rows_config(n, k, block_m, tok_e) for tok_e in (None, 0.0, math.inf)]
        return tuple(dict.fromkeys([*found, *by_rows]))
    wide = _short_k_config(n, k, block_m, arch)
    if wide is not None:
        return (wide, *by_rows)
    cfg = choose_config(n, k, block_m)
    found = [cfg, general_config(block_m)]
    if cfg.schedule == "balanced":
        found.append(dataclasses.replace(cfg, schedule="strided"))  # what choose_schedule may switch to
    return tuple(dict.fromkeys([*found, *by_rows]))


@functools.lru_cache(maxsize=1024)
def shape_workspace_bytes(n: int, k: int, block_ms: tuple[int, ...], num_sms: int, arch: str) -> int:
    """:func:`max_workspace_bytes` of one ``N x K`` shape, on checked arguments."""
    return max((cfg.workspace(num_sms * cfg.ctas_per_sm).nbytes
                for block_m in block_ms for cfg in configs_for(n, k, block_m, arch)), default=0)


def max_workspace_bytes(
    weights: PackedWeight | Iterable[PackedWeight],
    *,
    block_ms: Iterable[int] = BLOCK_MS,
    num_sms: int | None = None,
    arch: str | None = None,
    device: torch.device | str | int | None = None,
) -> int:
    """Bytes of a workspace that serves every launch ``gemm`` can plan for these weights with
    these block sizes (any routing capacity), on ``device`` (or ``num_sms`` SMs of ``arch``)."""
    num_sms, arch = _device_facts(device, num_sms, arch)
    block_ms = tuple(check_block_m(b, arch) for b in block_ms)
    weights = [weights] if isinstance(weights, PackedWeight) else list(weights)
    return max((shape_workspace_bytes(w.n, w.k, block_ms, num_sms, arch) for w in weights), default=0)


KIMI_SHAPES = ((4096, 7168), (7168, 2048), (512, 7168), (7168, 256))
"""(N, K) of the Kimi K2.x expert GEMMs: gate_up and down under EP8, then under TP8."""
KIMI_GATE_UP = ((4096, 7168), (512, 7168))
"""The gate_up GEMMs among them (``fused_moe`` runs them with SiLU-and-mul fused)."""


@functools.lru_cache(maxsize=256)
def silu_mul_twin(config: KernelConfig, n: int) -> KernelConfig | None:
    """The configuration that fuses SiLU-and-mul into ``config``'s kernel for ``n`` weight rows
    (``config`` itself if it does), or None where the activation runs as a second step: the WGMMA
    kernel's where it fits; the decode kernel's on its wide 16-token tiles with row widths, where
    it was measured (docs/optimization.md, session 35), and two steps elsewhere."""
    if config.silu_mul:
        return config
    if config.fits_silu_mul(n) and (isinstance(config, WgmmaConfig) or config.row_widths):
        return dataclasses.replace(config, silu_mul=True)
    return None


def default_configs(arch: str = DEFAULT_ARCH) -> list[KernelConfig]:
    """Every configuration the Kimi shapes can launch at any block size, with the fused SiLU-and-mul
    twins of the gate_up ones, and the one-fma twin of each (what ``precompile`` builds)."""
    found: dict[KernelConfig, None] = {}
    wgmma_blocks = WGMMA_BLOCK_MS if arch == WGMMA_ARCH else ()
    for block_m in dict.fromkeys((*BLOCK_MS, *wgmma_blocks)):
        for n, k in KIMI_SHAPES:
            for cfg in configs_for(n, k, block_m, arch):
                found[cfg] = None
                fused = silu_mul_twin(cfg, n) if (n, k) in KIMI_GATE_UP else None
                if fused is not None:
                    found[fused] = None
    # Weights whose scales are all below 2^-5 run the one-fma twins.
    return [*found, *(_subnormal_twin(c) for c in found)]


def kernels(arch: str = DEFAULT_ARCH) -> list[CudaKernel]:
    """The family's precompile hook (:mod:`chord_kernels.families`): the kernels of
    :func:`default_configs`, each source once (a configuration's ``shift_pairs`` shows in the source only in
    the one-fma form: a gate_up and a down configuration can give one kernel)."""
    return distinct_sources(cfg.kernel() for cfg in default_configs(arch))
