"""The GPU path's staging: symmetric memory for the fused kernel, and the kernel launch.

:class:`SymmetricWorkspace` holds ``x`` in PyTorch symmetric memory; each rank pulls its rows
from every peer over NVLink, reduces, adds, normalises, and pushes the normalised rows to every
peer (two-shot), between entry and exit barriers on the signal pads (the protocol is in
:mod:`chord_tokenweave.kernels`). NVLink multicast is never used: the variables of
:mod:`chord_tokenweave.env` are forced before allocation and ``multicast_ptr == 0`` is asserted.
Allocation is collective: every rank of the group creates its workspace with the same arguments.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
import torch.distributed as dist

from chord_tokenweave.checks import (
    SUPPORTED_DTYPES,
    Algo,
    ResidualMode,
    check_args,
    describe,
    group_info,
)
from chord_tokenweave.env import disable_multicast
from chord_tokenweave.errors import (
    BarrierTimeoutError,
    MulticastForbiddenError,
    TokenWeaveError,
    TokenWeaveInputError,
)
from chord_tokenweave.launch import DEFAULT_NUM_CTAS, KERNELS, kernel_config, triton_next_pow2

DEFAULT_TIMEOUT_MS = 60_000


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
        :func:`~chord_tokenweave.launch.kernel_config`); ``stages > 1`` software-pipelines the
        row loop (cp.async prefetch of the next rows: more bytes in flight per CTA, so fewer CTAs
        suffice)."""
        if KERNELS is None:
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
        pg, rank, world_size = group_info(group)
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
        self.buffer, self.handle = symmetric_alloc(numel, dtype, self.device, pg)
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
        """Run the fused kernel on the current stream; see
        :func:`~chord_tokenweave.fused.fused_allreduce_rmsnorm`."""
        assert KERNELS is not None
        num_tokens, hidden, start, end = check_args(
            x, residual, weight, eps, self.residual_mode, self.world_size, self.rank
        )
        if hidden != self.hidden or x.dtype != self.dtype or x.device != self.device:
            raise TokenWeaveInputError(
                f"workspace is for hidden {self.hidden} {self.dtype} on {self.device}, got "
                f"{describe(x)}"
            )
        xin = self.input_buffer(num_tokens, channel)
        if x.data_ptr() != xin.data_ptr():
            xin.copy_(x)
        if algo == "one_shot":
            if self.residual_mode != "replicated":
                raise TokenWeaveInputError("algo='one_shot' needs residual_mode='replicated'")
            mode, row_lo, row_hi, res_base = KERNELS.MODE_ONESHOT, 0, num_tokens, 0
            y = out if out is not None else self._local_out(channel)[:num_tokens]
            if y.shape != x.shape or not y.is_contiguous():
                raise TokenWeaveInputError(f"out must be contiguous {list(x.shape)}")
            h_target = residual
        elif algo == "two_shot":
            if self.residual_mode == "sharded":
                mode, res_base, h_target = KERNELS.MODE_SHARDED, start, residual
            else:
                mode, res_base = KERNELS.MODE_REPLICATED, 0
                h_target = self.residual_buffer(num_tokens, channel)
            row_lo, row_hi = start, end
            y = xin
        else:
            raise TokenWeaveInputError(f"algo must be 'two_shot' or 'one_shot', got {algo!r}")
        ctas = min(DEFAULT_NUM_CTAS, self.max_ctas) if num_ctas is None else num_ctas
        if not 1 <= ctas <= self.max_ctas:
            raise TokenWeaveInputError(f"num_ctas must be in [1, {self.max_ctas}], got {ctas}")
        rows, warps, n_stages = kernel_config(
            self.world_size, hidden, rows_per_iter or self.rows_per_iter,
            num_warps or self.num_warps, stages or self.stages,
        )
        if num_tokens == 0:
            return y, h_target
        KERNELS.fused_ar_rmsnorm_kernel[(ctas,)](
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
            BLOCK_D=triton_next_pow2(hidden),
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


def symmetric_alloc(
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
    pg, _, _ = group_info(group)
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

