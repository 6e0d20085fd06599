"""Workspaces of the indexed kernels: caller-owned device buffers for counters and split-K partials.

A workspace is a contiguous uint8 CUDA tensor. Its first :data:`COUNTER_BYTES` bytes hold int32
counters (the dynamic schedule's item counter, the balanced schedule's split-item arrival
counters), then fp32 split-K partial sums (scratch). The counter region has the same size for every
launch, so the partials of one launch never land where another launch on the same workspace keeps
its counters (a launch's counters depend on its configuration and grid; with a layout-dependent
boundary, a small-grid launch's partials overwrote a larger-grid launch's zeroed counters). The
invariants:

* the counter bytes are zero when the workspace is allocated (:func:`new_workspace` does it);
* every launch leaves them zero again (the last CTA, or the last part of a split item, resets
  its counter), so one workspace serves any number of launches and CUDA-graph replays, with no
  memset between them;
* one workspace must never be used by two launches that may overlap in time: launches on two
  streams, two graphs replayed concurrently, or a graph and an eager call. A graph replays the
  workspace it captured. (vLLM's experts classes hold one per micro-batch stream.)

Direct users need not pass one: :func:`default_workspace` keeps one per (device, stream), zeroed
when allocated, grown when a larger plan needs it (a replaced buffer stays alive because a graph
may have captured it). :func:`chord_kernels.indexed.prepare` allocates it before capture.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from chord_kernels import hardware
from chord_kernels.checks import require_tensor
from chord_kernels.errors import ChordInputError

_ALIGN = 16
COUNTER_BYTES = 64 * 1024
"""The counter region of every workspace: room for 16384 int32 counters, more than any launch
needs (at most CTAs x warps: 4 x 8 per SM)."""


@dataclass(frozen=True)
class WorkspaceLayout:
    """Workspace one launch needs: int32 counters kept zero, then fp32 scratch partials."""

    counters: int = 0
    """int32 schedule counters (zero before and after every launch)."""
    flags: int = 0
    """int32 split-K arrival counters (zero before and after every launch), after ``counters``."""
    partials: int = 0
    """fp32 split-K partial sums (scratch, no initial value), 16-byte aligned after the counters."""

    @property
    def zeroed_bytes(self) -> int:
        return 4 * (self.counters + self.flags)

    def __post_init__(self) -> None:
        if self.zeroed_bytes > COUNTER_BYTES:
            raise ChordInputError(f"{self.counters + self.flags} counters exceed the workspace's counter "
                                  f"region of {COUNTER_BYTES // 4}")

    @property
    def partials_offset(self) -> int:
        """Where the partials start: after the counter region every layout shares."""
        return COUNTER_BYTES

    @property
    def nbytes(self) -> int:
        """Bytes of workspace the launch needs (0: none)."""
        return self.partials_offset + 4 * self.partials if self.partials else self.zeroed_bytes

    def bind(self, workspace: torch.Tensor | None) -> dict[str, int | None]:
        """Device addresses of the ``counters``, ``flags`` and ``partials`` regions of a checked
        ``workspace`` (None where a region is empty)."""
        if self.nbytes == 0:
            return {"counters": None, "flags": None, "partials": None}
        if workspace is None or workspace.numel() < self.nbytes:
            raise ChordInputError(f"workspace: expected at least {self.nbytes} bytes, got "
                                  f"{None if workspace is None else workspace.numel()}")
        base = workspace.data_ptr()
        return {
            "counters": base if self.counters else None,
            "flags": base + 4 * self.counters if self.flags else None,
            "partials": base + self.partials_offset if self.partials else None,
        }


def new_workspace(nbytes: int, device: torch.device | str | int | None = None) -> torch.Tensor:
    """A zeroed workspace of ``nbytes`` bytes on ``device`` (default: the current CUDA device),
    allocated and zeroed on the current stream. Size it with :attr:`LaunchPlan.workspace_bytes
    <chord_kernels.indexed.LaunchPlan.workspace_bytes>` or
    :func:`~chord_kernels.indexed.max_workspace_bytes`."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
        raise ChordInputError(f"nbytes: expected a non-negative integer, got {nbytes!r}")
    return torch.zeros(max(nbytes, _ALIGN), dtype=torch.uint8, device=hardware.cuda_device(device))


def check_workspace(workspace: torch.Tensor, nbytes: int, device: torch.device) -> torch.Tensor:
    """Refuse a workspace that is not a large enough, 16-byte aligned uint8 tensor on ``device``."""
    require_tensor("workspace", workspace, dtype=torch.uint8, ndim=1, device=device, contiguous=True)
    if workspace.numel() < nbytes:
        raise ChordInputError(
            f"workspace: expected at least {nbytes} bytes for this launch, got {workspace.numel()} "
            "(size it with chord_kernels.indexed.max_workspace_bytes)"
        )
    if workspace.data_ptr() % _ALIGN:
        raise ChordInputError(f"workspace: expected a 16-byte aligned data pointer, got {workspace.data_ptr():#x}")
    return workspace


_DEFAULTS: dict[tuple[int, int], torch.Tensor] = {}
_RETIRED: list[torch.Tensor] = []  # replaced defaults: a captured graph may still replay them


def default_workspace(nbytes: int, device: torch.device, stream: torch.cuda.Stream,
                      reserve: int = 0) -> torch.Tensor | None:
    """The default workspace of ``(device, stream)`` with at least ``nbytes`` bytes.

    A new one (``max(nbytes, reserve)`` bytes, zeroed on ``stream``) is allocated when there is
    none or it is too small. During CUDA-graph capture nothing can be zeroed ahead of the graph,
    so a capture on a stream without a large enough default returns None: the caller then uses a
    temporary recorded into the graph (see :func:`graph_workspace`).
    """
    key = (device.index, stream.cuda_stream)
    current = _DEFAULTS.get(key)
    if current is not None and current.numel() >= nbytes:
        return current
    if torch.cuda.is_current_stream_capturing():
        return None
    with torch.cuda.stream(stream):
        fresh = new_workspace(max(nbytes, reserve), device)
    if current is not None:
        _RETIRED.append(current)
    _DEFAULTS[key] = fresh
    return fresh


def graph_workspace(layout: WorkspaceLayout, device: torch.device) -> torch.Tensor:
    """A workspace for one launch inside a CUDA-graph capture: allocated from the graph's pool,
    its counters zeroed by a memset recorded into the graph (so correct on every replay, at the
    cost of that memset: pass ``workspace=`` or run :func:`~chord_kernels.indexed.prepare` on the
    capturing stream to avoid it)."""
    workspace = torch.empty(max(layout.nbytes, _ALIGN), dtype=torch.uint8, device=device)
    workspace[: layout.zeroed_bytes].zero_()
    return workspace
