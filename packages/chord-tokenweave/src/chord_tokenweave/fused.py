"""Fused AllReduce + residual add + RMSNorm.

Numerics (every path, GPU kernel and torch fallback alike)::

    s = fp32(x_0) + fp32(x_1) + ... + fp32(x_{W-1})      # fixed rank order, fp32
    h = bf16(s + fp32(residual))                         # the new residual
    y = bf16(fp32(h) * rsqrt(mean(fp32(h)^2) + eps) * fp32(weight))

Each row is computed by exactly one rank (its owner) and then copied to the others, so every
rank ends with bit-identical ``y``.

Residual modes:

* ``"sharded"`` (TokenWeave): ``residual`` is ``[rows owned by this rank, D]`` — rows
  ``shard_range(T, W, rank)`` — and is updated in place; it never leaves the rank.
* ``"replicated"``: ``residual`` is ``[T, D]`` on every rank; the returned residual is the full
  updated ``[T, D]`` (on GPU a view of the symmetric workspace that every owner pushed into).

GPU path (``x`` on CUDA, NCCL group, Triton present): :class:`SymmetricWorkspace` holds ``x`` in
PyTorch symmetric memory; each rank pulls its rows from every peer over NVLink, reduces, adds,
normalises, and pushes the normalised rows to every peer (two-shot), between entry and exit
barriers on the signal pads. NVLink multicast is never used: the variables of
:mod:`chord_tokenweave.env` are forced before allocation and ``multicast_ptr == 0`` is asserted.
Fallback (CPU / gloo, or GPU without Triton): collectives with the same semantics.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any, Literal

import torch
import torch.distributed as dist

from chord_tokenweave.env import disable_multicast
from chord_tokenweave.errors import (
    BarrierTimeoutError,
    MulticastForbiddenError,
    TokenWeaveError,
    TokenWeaveInputError,
)

ResidualMode = Literal["sharded", "replicated"]
Algo = Literal["two_shot", "one_shot"]

SUPPORTED_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
DEFAULT_TIMEOUT_MS = 60_000
# 16 CTAs with the pipelined default configuration were within 2-10% of the best of a
# 4..64-CTA sweep at 1K-32K tokens (H200 TP2, hidden 8192; docs/tokenweave.md).
DEFAULT_NUM_CTAS = 16
SMEM_LIMIT = 220 * 1024  # H100/H200: 227 KB of shared memory per CTA at most

try:  # Triton is optional (the `gpu` extra); CPU CI runs without the kernels.
    from chord_tokenweave import kernels as _kernels
except Exception:  # pragma: no cover - depends on the installation
    _kernels = None  # type: ignore[assignment]


def triton_available() -> bool:
    """True when the Triton kernels imported (they still need CUDA to run)."""
    return _kernels is not None


# ----------------------------------------------------------------------------- reference math


def shard_range(num_tokens: int, world_size: int, rank: int) -> tuple[int, int]:
    """Rows ``[start, end)`` that ``rank`` owns: balanced, contiguous, possibly empty."""
    if world_size <= 0 or not 0 <= rank < world_size:
        raise TokenWeaveInputError(f"rank {rank} is not in a world of size {world_size}")
    if num_tokens < 0:
        raise TokenWeaveInputError(f"num_tokens must be >= 0, got {num_tokens}")
    return rank * num_tokens // world_size, (rank + 1) * num_tokens // world_size


def reduce_in_rank_order(parts: Sequence[torch.Tensor]) -> torch.Tensor:
    """fp32 sum of ``parts`` in list order (the fixed order every path uses)."""
    acc = parts[0].float().clone()
    for part in parts[1:]:
        acc += part.float()
    return acc


def add_rmsnorm_reference(
    reduced: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(y, h)`` from an fp32 (or any) reduced sum: see the module docstring."""
    h = (reduced.float() + residual.float()).to(residual.dtype)
    hf = h.float()
    rstd = torch.rsqrt(hf.pow(2).mean(dim=-1, keepdim=True) + eps)
    y = (hf * rstd * weight.float()).to(residual.dtype)
    return y, h


def pipeline_smem(world_size: int, hidden: int, rows: int, stages: int) -> int:
    """Shared memory the pipelined row loop needs (W peer tiles + the residual per stage).

    Matches what Triton 3.6/3.9 allocate for this kernel: (stages - 1) buffered iterations.
    """
    block = 1 << max(0, (hidden - 1).bit_length())
    return max(0, stages - 1) * rows * (world_size + 1) * block * 2


def default_config(world_size: int, hidden: int) -> tuple[int, int, int]:
    """``(rows_per_iter, num_warps, stages)`` for the fused kernel when none is given.

    For rows of >= 4096 elements: two rows per iteration, 16 warps, three pipeline stages (the
    fastest configuration of the H200 TP2 sweep at every size from 2K tokens: 409 us at 8K
    tokens with 16 CTAs, against 884 us for one row, 8 warps, no pipelining), falling back to
    fewer rows/stages where the shared memory would not fit (more ranks). Smaller rows: several
    rows per iteration, no pipelining (not measured).
    """
    block = 1 << max(0, (hidden - 1).bit_length())
    if block < 4096:
        return max(1, 4096 // block), 8 if block * max(1, 4096 // block) >= 4096 else 4, 1
    for rows, warps, stages in ((2, 16, 3), (1, 8, 3)):
        if pipeline_smem(world_size, hidden, rows, stages) <= SMEM_LIMIT:
            return rows, warps, stages
    return 2, 16, 1


# ----------------------------------------------------------------------------- checks


def _group_info(group: dist.ProcessGroup | None) -> tuple[dist.ProcessGroup, int, int]:
    if not dist.is_available() or not dist.is_initialized():
        raise TokenWeaveError("torch.distributed is not initialised (call init_process_group)")
    pg = group if group is not None else dist.group.WORLD
    assert pg is not None
    return pg, dist.get_rank(pg), dist.get_world_size(pg)


def _check_args(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
    residual_mode: str,
    world_size: int,
    rank: int,
) -> tuple[int, int, int, int]:
    if not isinstance(x, torch.Tensor) or x.ndim != 2:
        raise TokenWeaveInputError(f"x must be a 2-D [tokens, hidden] tensor, got {_desc(x)}")
    if x.dtype not in SUPPORTED_DTYPES:
        raise TokenWeaveInputError(f"x dtype must be one of {SUPPORTED_DTYPES}, got {x.dtype}")
    num_tokens, hidden = x.shape
    if weight.shape != (hidden,) or weight.dtype != x.dtype:
        raise TokenWeaveInputError(
            f"weight must be [{hidden}] {x.dtype}, got {tuple(weight.shape)} {weight.dtype}"
        )
    start, end = shard_range(num_tokens, world_size, rank)
    if residual_mode == "sharded":
        want = (end - start, hidden)
    elif residual_mode == "replicated":
        want = (num_tokens, hidden)
    else:
        raise TokenWeaveInputError(
            f"residual_mode must be 'sharded' or 'replicated', got {residual_mode!r}"
        )
    if tuple(residual.shape) != want or residual.dtype != x.dtype:
        raise TokenWeaveInputError(
            f"residual ({residual_mode}) must be {list(want)} {x.dtype} on rank {rank} of "
            f"{world_size} for {num_tokens} tokens, got {list(residual.shape)} {residual.dtype}"
        )
    for name, t in (("residual", residual), ("weight", weight)):
        if t.device != x.device:
            raise TokenWeaveInputError(f"{name} is on {t.device}, x is on {x.device}")
        if not t.is_contiguous():
            raise TokenWeaveInputError(f"{name} must be contiguous")
    if not (isinstance(eps, float | int) and eps > 0 and math.isfinite(eps)):
        raise TokenWeaveInputError(f"eps must be a positive finite float, got {eps!r}")
    return num_tokens, hidden, start, end


def _desc(t: Any) -> str:
    if isinstance(t, torch.Tensor):
        return f"{list(t.shape)} {t.dtype} on {t.device}"
    return type(t).__name__


# ----------------------------------------------------------------------------- sequential baseline


def add_rmsnorm_(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> torch.Tensor:
    """``residual <- x + residual``; returns ``rmsnorm(residual) * weight`` (same numerics).

    One Triton program per row on CUDA, the torch reference elsewhere.
    """
    if x.is_cuda and _kernels is not None and x.is_contiguous() and residual.is_contiguous():
        out = torch.empty_like(x)
        if x.shape[0] > 0:
            _kernels.add_rmsnorm_kernel[(x.shape[0],)](
                x, residual, weight, out, x.shape[1], float(eps),
                BLOCK_D=triton_next_pow2(x.shape[1]), num_warps=8 if x.shape[1] >= 4096 else 4,
            )
        return out
    y, h = add_rmsnorm_reference(x, residual, weight, eps)
    residual.copy_(h)
    return y


def allreduce_add_rmsnorm(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
    group: dist.ProcessGroup | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The sequential baseline: library all-reduce of ``x`` (in place), then add + RMSNorm.

    ``residual`` is replicated ``[T, D]`` and updated in place. On gloo the all-reduce runs in
    fp32 (gloo's bf16 support varies); NCCL reduces in the tensor's dtype like vLLM does.
    """
    pg, _, _ = _group_info(group)
    if x.is_cuda:
        dist.all_reduce(x, group=pg)
        reduced = x
    else:
        reduced = x.float()
        dist.all_reduce(reduced, group=pg)
        reduced = reduced.to(x.dtype)
    return add_rmsnorm_(reduced, residual, weight, eps), residual


def triton_next_pow2(n: int) -> int:
    """Smallest power of two >= n."""
    return 1 << max(0, (n - 1).bit_length())


# ----------------------------------------------------------------------------- torch fallback


def _all_gather_rows(t: torch.Tensor, pg: dist.ProcessGroup, world_size: int) -> list[torch.Tensor]:
    """All-gather equally shaped tensors bit-exactly (gloo has no bf16 for every op)."""
    wire = t.contiguous()
    if wire.dtype in (torch.bfloat16, torch.float16):
        wire = wire.view(torch.int16).to(torch.int32)
        parts = [torch.empty_like(wire) for _ in range(world_size)]
        dist.all_gather(parts, wire, group=pg)
        return [p.to(torch.int16).view(t.dtype) for p in parts]
    parts = [torch.empty_like(wire) for _ in range(world_size)]
    dist.all_gather(parts, wire, group=pg)
    return parts


def _fallback(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
    pg: dist.ProcessGroup,
    rank: int,
    world_size: int,
    residual_mode: str,
    out: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    num_tokens, hidden = x.shape
    start, end = shard_range(num_tokens, world_size, rank)
    chunk = -(-num_tokens // world_size)
    full = _all_gather_rows(x, pg, world_size)
    reduced = reduce_in_rank_order([p[start:end] for p in full])
    own_res = residual if residual_mode == "sharded" else residual[start:end]
    y_own, h_own = add_rmsnorm_reference(reduced, own_res, weight, eps)

    def gather_rows(own: torch.Tensor) -> torch.Tensor:
        padded = own.new_zeros(chunk, hidden)
        padded[: own.shape[0]] = own
        parts = _all_gather_rows(padded, pg, world_size)
        pieces = []
        for p, part in enumerate(parts):
            s, e = shard_range(num_tokens, world_size, p)
            pieces.append(part[: e - s])
        return torch.cat(pieces, dim=0)

    y = gather_rows(y_own)
    if residual_mode == "sharded":
        residual.copy_(h_own)
        res_out = residual
    else:
        res_out = gather_rows(h_own)
        residual.copy_(res_out)
        res_out = residual
    if out is not None:
        out.copy_(y)
        y = out
    return y, res_out


# ----------------------------------------------------------------------------- GPU workspace


class SymmetricWorkspace:
    """Symmetric-memory staging for the fused kernel: ``channels`` independent row buffers.

    Layout of the one symmetric allocation (elements): for each channel, an ``x`` plane of
    ``max_tokens x hidden`` (input, then the normalised output) and, in replicated mode, a
    residual plane of the same size. Channels have their own signal-pad slots and epoch
    counters, so the two splits of the weave can use channels 0 and 1 concurrently.
    """

    def __init__(
        self,
        group: dist.ProcessGroup | None,
        *,
        max_tokens: int,
        hidden: int,
        dtype: torch.dtype = torch.bfloat16,
        device: torch.device | str | None = None,
        channels: int = 2,
        residual_mode: ResidualMode = "sharded",
        max_ctas: int = 64,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        trap_on_timeout: bool = True,
        rows_per_iter: int | None = None,
        num_warps: int | None = None,
        stages: int | None = None,
    ) -> None:
        """``rows_per_iter``/``num_warps``/``stages`` are the kernel's defaults (None:
        :func:`default_config`); ``stages > 1`` software-pipelines the row loop (cp.async
        prefetch of the next rows: more bytes in flight per CTA, so fewer CTAs suffice)."""
        if _kernels is None:
            raise TokenWeaveError("the GPU path needs Triton (pip install 'chord-tokenweave[gpu]')")
        if max_tokens <= 0 or hidden <= 0 or channels <= 0 or max_ctas <= 0:
            raise TokenWeaveInputError(
                f"max_tokens, hidden, channels, max_ctas must be positive, got {max_tokens}, "
                f"{hidden}, {channels}, {max_ctas}"
            )
        if dtype not in SUPPORTED_DTYPES:
            raise TokenWeaveInputError(f"dtype must be one of {SUPPORTED_DTYPES}, got {dtype}")
        if residual_mode not in ("sharded", "replicated"):
            raise TokenWeaveInputError(f"residual_mode {residual_mode!r} is not supported")
        disable_multicast()
        pg, rank, world_size = _group_info(group)
        self.group, self.rank, self.world_size = pg, rank, world_size
        self.device = torch.device(device) if device is not None else torch.device(
            "cuda", torch.cuda.current_device()
        )
        self.max_tokens, self.hidden, self.dtype = max_tokens, hidden, dtype
        self.channels, self.residual_mode = channels, residual_mode
        self.timeout_ms, self.trap_on_timeout = timeout_ms, trap_on_timeout
        self.rows_per_iter, self.num_warps, self.stages = rows_per_iter, num_warps, stages
        self.planes = 2 if residual_mode == "replicated" else 1
        self.plane_elems = max_tokens * hidden
        numel = channels * self.planes * self.plane_elems
        self.buffer, self.handle = _symmetric_alloc(numel, dtype, self.device, pg)
        if int(self.handle.multicast_ptr) != 0:
            raise MulticastForbiddenError(
                "symmetric memory came back with a multicast mapping (multicast_ptr != 0); "
                "NVLink multicast is forbidden here — is TORCH_SYMM_MEM_DISABLE_MULTICAST=1 set "
                "before torch initialised symmetric memory?"
            )
        self.buf_ptrs = torch.tensor(
            list(self.handle.buffer_ptrs), dtype=torch.int64, device=self.device
        )
        self.pad_ptrs = torch.tensor(
            list(self.handle.signal_pad_ptrs), dtype=torch.int64, device=self.device
        )
        pad = _own_signal_pad(self.handle, rank)
        pad_slots = pad.numel()
        self.max_ctas = min(max_ctas, pad_slots // (channels * world_size))
        if self.max_ctas < 1:
            raise TokenWeaveError(
                f"the signal pad has {pad_slots} slots, too few for {channels} channels x "
                f"{world_size} ranks"
            )
        used = channels * self.max_ctas * world_size
        pad[:used].zero_()  # our slots start at epoch 0 (peers launch only after the barrier)
        self.counters = torch.zeros(channels, self.max_ctas, dtype=torch.int32, device=self.device)
        self.status = torch.zeros(4, dtype=torch.int32, device=self.device)
        self._y_local: dict[int, torch.Tensor] = {}
        torch.cuda.synchronize(self.device)
        dist.barrier(group=pg)

    # views ---------------------------------------------------------------------------------
    def _plane(self, channel: int, plane: int, num_tokens: int) -> torch.Tensor:
        if not 0 <= channel < self.channels:
            raise TokenWeaveInputError(f"channel must be in [0, {self.channels}), got {channel}")
        if not 0 <= num_tokens <= self.max_tokens:
            raise TokenWeaveInputError(
                f"num_tokens {num_tokens} exceeds the workspace's max_tokens {self.max_tokens}"
            )
        off = (channel * self.planes + plane) * self.plane_elems
        return self.buffer[off : off + num_tokens * self.hidden].view(num_tokens, self.hidden)

    def input_buffer(self, num_tokens: int, channel: int = 0) -> torch.Tensor:
        """``[T, hidden]`` view to write ``x`` into (zero copy); holds the output afterwards."""
        return self._plane(channel, 0, num_tokens)

    def residual_buffer(self, num_tokens: int, channel: int = 0) -> torch.Tensor:
        """Replicated mode: ``[T, hidden]`` view that receives the updated residual."""
        if self.planes < 2:
            raise TokenWeaveInputError("residual_buffer exists only in replicated mode")
        return self._plane(channel, 1, num_tokens)

    # run -----------------------------------------------------------------------------------
    def __call__(
        self,
        x: torch.Tensor,
        residual: torch.Tensor,
        weight: torch.Tensor,
        eps: float,
        *,
        channel: int = 0,
        num_ctas: int | None = None,
        algo: Algo = "two_shot",
        rows_per_iter: int | None = None,
        num_warps: int | None = None,
        stages: int | None = None,
        out: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Run the fused kernel on the current stream; see :func:`fused_allreduce_rmsnorm`."""
        assert _kernels is not None
        num_tokens, hidden, start, end = _check_args(
            x, residual, weight, eps, self.residual_mode, self.world_size, self.rank
        )
        if hidden != self.hidden or x.dtype != self.dtype or x.device != self.device:
            raise TokenWeaveInputError(
                f"workspace is for hidden {self.hidden} {self.dtype} on {self.device}, got "
                f"{_desc(x)}"
            )
        xin = self.input_buffer(num_tokens, channel)
        if x.data_ptr() != xin.data_ptr():
            xin.copy_(x)
        if algo == "one_shot":
            if self.residual_mode != "replicated":
                raise TokenWeaveInputError("algo='one_shot' needs residual_mode='replicated'")
            mode, row_lo, row_hi, res_base = _kernels.MODE_ONESHOT, 0, num_tokens, 0
            y = out if out is not None else self._local_out(channel)[:num_tokens]
            if y.shape != x.shape or not y.is_contiguous():
                raise TokenWeaveInputError(f"out must be contiguous {list(x.shape)}")
            h_target = residual
        elif algo == "two_shot":
            if self.residual_mode == "sharded":
                mode, res_base, h_target = _kernels.MODE_SHARDED, start, residual
            else:
                mode, res_base = _kernels.MODE_REPLICATED, 0
                h_target = self.residual_buffer(num_tokens, channel)
            row_lo, row_hi = start, end
            y = xin
        else:
            raise TokenWeaveInputError(f"algo must be 'two_shot' or 'one_shot', got {algo!r}")
        ctas = min(DEFAULT_NUM_CTAS, self.max_ctas) if num_ctas is None else num_ctas
        if not 1 <= ctas <= self.max_ctas:
            raise TokenWeaveInputError(f"num_ctas must be in [1, {self.max_ctas}], got {ctas}")
        block_d = triton_next_pow2(hidden)
        d_rows, d_warps, d_stages = default_config(self.world_size, hidden)
        rows = rows_per_iter or self.rows_per_iter or d_rows
        warps = num_warps or self.num_warps or (
            d_warps if rows == d_rows else 8 if block_d * rows >= 4096 else 4
        )
        n_stages = stages or self.stages or d_stages
        if rows <= 0 or warps not in (1, 2, 4, 8, 16, 32) or n_stages <= 0:
            raise TokenWeaveInputError(
                f"rows_per_iter must be > 0, num_warps a power of two <= 32 and stages > 0; "
                f"got {rows}, {warps}, {n_stages}"
            )
        if num_tokens == 0:
            return y, h_target
        _kernels.fused_ar_rmsnorm_kernel[(ctas,)](
            self.buf_ptrs,
            (channel * self.planes) * self.plane_elems,
            (channel * self.planes + 1) * self.plane_elems,
            self.pad_ptrs,
            channel * self.max_ctas * self.world_size,
            self.counters[channel],
            self.status,
            residual,
            res_base,
            weight,
            y,
            row_lo,
            row_hi,
            self.rank,
            hidden,
            float(eps),
            int(self.timeout_ms) * 1_000_000,
            W=self.world_size,
            WP=triton_next_pow2(self.world_size),
            BLOCK_D=block_d,
            ROWS=rows,
            MODE=mode,
            TRAP=self.trap_on_timeout,
            STAGES=n_stages,
            num_warps=warps,
        )
        if out is not None and y is not out:
            out.copy_(y)
            y = out
        return y, h_target

    def _local_out(self, channel: int) -> torch.Tensor:
        if channel not in self._y_local:
            self._y_local[channel] = torch.empty(
                self.max_tokens, self.hidden, dtype=self.dtype, device=self.device
            )
        return self._y_local[channel]

    def check(self) -> None:
        """Raise :class:`BarrierTimeoutError` if a barrier timed out (synchronises the stream)."""
        code, cta, late_mask, rank = (int(v) for v in self.status.tolist())
        if code:
            which = {1: "entry", 2: "exit"}.get(code, f"#{code}")
            late = [p for p in range(self.world_size) if late_mask >> p & 1]
            raise BarrierTimeoutError(
                f"rank {rank}: {which} barrier of CTA {cta} timed out after {self.timeout_ms} ms "
                f"waiting for ranks {late}; this workspace is no longer usable"
            )


def _symmetric_alloc(
    numel: int, dtype: torch.dtype, device: torch.device, pg: dist.ProcessGroup
) -> tuple[torch.Tensor, Any]:
    """A dedicated symmetric allocation (own signal pad) and its rendezvous handle.

    ``empty_strided_p2p`` bypasses the implicit memory pool of newer torch, so no other
    symmetric tensor shares our signal pad. torch < 2.9 needs the group registered first.
    """
    import torch.distributed._symmetric_memory as symm
    from torch._C._distributed_c10d import _SymmetricMemory

    group_name = pg.group_name
    if hasattr(symm, "enable_symm_mem_for_group"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            symm.enable_symm_mem_for_group(group_name)
    try:
        if symm.get_backend(device) is None:
            symm.set_backend("CUDA")
    except (AttributeError, RuntimeError):
        pass  # older torch: the CUDA backend is the only one
    buf = _SymmetricMemory.empty_strided_p2p((numel,), (1,), dtype, device, group_name)
    return buf, symm.rendezvous(buf, group_name)


def _own_signal_pad(handle: Any, rank: int) -> torch.Tensor:
    """This rank's whole signal pad as an int32 vector."""
    try:
        pad = handle.get_signal_pad(rank)  # sizes=[] means the whole pad (uint32)
    except (TypeError, RuntimeError):
        from torch._C._distributed_c10d import _SymmetricMemory

        size = int(getattr(_SymmetricMemory, "signal_pad_size", 2048))
        pad = handle.get_signal_pad(rank, [size // 4], torch.int32)
    return pad.view(-1).view(torch.int32)


_WORKSPACES: dict[tuple[Any, ...], SymmetricWorkspace] = {}


def get_workspace(
    group: dist.ProcessGroup | None,
    *,
    max_tokens: int,
    hidden: int,
    dtype: torch.dtype,
    device: torch.device,
    residual_mode: ResidualMode,
    channels: int = 2,
) -> SymmetricWorkspace:
    """A cached workspace large enough for ``max_tokens`` (re-allocated, collectively, to grow).

    Allocation is collective: every rank must call with the same arguments.
    """
    pg, _, _ = _group_info(group)
    key = (pg.group_name, str(device), dtype, hidden, residual_mode, channels)
    ws = _WORKSPACES.get(key)
    if ws is None or ws.max_tokens < max_tokens:
        ws = SymmetricWorkspace(
            pg,
            max_tokens=max(max_tokens, ws.max_tokens * 2 if ws else max_tokens),
            hidden=hidden,
            dtype=dtype,
            device=device,
            channels=channels,
            residual_mode=residual_mode,
        )
        _WORKSPACES[key] = ws
    return ws


def uses_gpu_path(x: torch.Tensor, group: dist.ProcessGroup | None = None) -> bool:
    """Whether :func:`fused_allreduce_rmsnorm` would run the Triton kernel for ``x``."""
    if not (x.is_cuda and _kernels is not None):
        return False
    pg, _, _ = _group_info(group)
    return dist.get_backend(pg) == "nccl"


# ----------------------------------------------------------------------------- public op


def fused_allreduce_rmsnorm(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
    group: dist.ProcessGroup | None = None,
    *,
    residual_mode: ResidualMode = "sharded",
    num_ctas: int | None = None,
    algo: Algo = "two_shot",
    workspace: SymmetricWorkspace | None = None,
    channel: int = 0,
    out: torch.Tensor | None = None,
    force_fallback: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """AllReduce ``x`` over ``group``, add ``residual``, RMSNorm with ``weight``.

    Returns ``(y, residual_out)``; ``y`` is ``[T, D]`` on every rank. On the GPU path ``y`` is a
    view of the workspace (valid until the next call on that channel) unless ``out`` is given;
    write ``x`` into ``workspace.input_buffer(T)`` to avoid the copy-in. ``residual_out`` is
    ``residual`` itself (updated in place) except for the replicated two-shot GPU path, where it
    is the workspace's residual plane. See the module docstring for the numerics.
    """
    pg, rank, world_size = _group_info(group)
    num_tokens, hidden, _, _ = _check_args(
        x, residual, weight, eps, residual_mode, world_size, rank
    )
    if out is not None and (out.shape != x.shape or out.dtype != x.dtype):
        raise TokenWeaveInputError(f"out must be {list(x.shape)} {x.dtype}, got {_desc(out)}")
    if algo not in ("two_shot", "one_shot"):
        raise TokenWeaveInputError(f"algo must be 'two_shot' or 'one_shot', got {algo!r}")
    if algo == "one_shot" and residual_mode != "replicated":
        raise TokenWeaveInputError("algo='one_shot' needs residual_mode='replicated'")
    if force_fallback or not uses_gpu_path(x, pg):
        return _fallback(x, residual, weight, eps, pg, rank, world_size, residual_mode, out)
    ws = workspace or get_workspace(
        pg,
        max_tokens=num_tokens,
        hidden=hidden,
        dtype=x.dtype,
        device=x.device,
        residual_mode=residual_mode,
    )
    if ws.residual_mode != residual_mode:
        raise TokenWeaveInputError(
            f"workspace is for residual_mode {ws.residual_mode!r}, call asked {residual_mode!r}"
        )
    return ws(x, residual, weight, eps, channel=channel, num_ctas=num_ctas, algo=algo, out=out)
