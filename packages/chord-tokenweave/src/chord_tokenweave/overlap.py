"""The TokenWeave overlap runtime: two token splits woven across a compute and a comm stream.

A layer is a list of *stages* (attention, MLP); each stage computes a partial sum per split and
ends in the fused AllReduce+add+RMSNorm. With splits A and B the streams run::

    compute: [stage k, A] [stage k, B] [stage k+1, A] [stage k+1, B] ...
    comm:              [AR k, A]   [AR k, B]     [AR k+1, A]   ...

``AR k, s`` waits for ``stage k, s`` (an event recorded on the compute stream) and ``stage k+1, s``
waits for ``AR k, s`` (an event recorded on the comm stream), so the communication of one split
hides under the computation of the other. The comm stream has high priority so its few CTAs get
scheduled as soon as SMs free up. Split B's attention reads split A's keys/values of the same
layer; the compute stream runs A before B, so they exist when B needs them.

On CPU (no streams) the same schedule runs in program order; the optional ``trace`` records it.
Every rank must take the same decisions (split offset, CTA count); :func:`check_consistent`
verifies that across the group once per token count.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from chord_tokenweave.errors import TokenWeaveError
from chord_tokenweave.table import Decision

# compute(split, hidden, out) -> partial ([t, D]; written into ``out`` when it is not None)
ComputeFn = Callable[[int, torch.Tensor, torch.Tensor | None], torch.Tensor]
# comm(split, partial, residual, norm_weight) -> (normalised hidden, residual)
CommFn = Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]
# out_buffer(split, num_tokens) -> where compute should write its partial (or None)
OutFn = Callable[[int, int], torch.Tensor | None]


@dataclass(frozen=True)
class Stage:
    """One compute block (attention or MLP) followed by AllReduce + add + RMSNorm."""

    name: str
    layer: int
    compute: ComputeFn
    norm_weight: torch.Tensor


@dataclass(frozen=True)
class TraceEvent:
    stream: str  # "compute" | "comm"
    stage: str
    layer: int
    split: int


def weave_order(stages: Sequence[tuple[str, int]], num_splits: int = 2) -> list[TraceEvent]:
    """The issue order of the weave (what :func:`run_weave` does, without running anything)."""
    order: list[TraceEvent] = []
    for name, layer in stages:
        for split in range(num_splits):
            order.append(TraceEvent("compute", name, layer, split))
            order.append(TraceEvent("comm", name, layer, split))
    return order


class StreamPair:
    """A compute stream (the current one) and a high-priority comm stream; no-ops on CPU."""

    def __init__(
        self, device: torch.device, *, overlap: bool = True,
        comm_stream: torch.cuda.Stream | None = None,
    ) -> None:
        # Without overlap everything runs in order on the current stream (baselines).
        self.cuda = device.type == "cuda" and overlap
        if self.cuda:
            # The current stream: under CUDA-graph capture that is the capture stream, and the
            # comm stream joins the capture through the events it waits on.
            self.compute_stream = torch.cuda.current_stream(device)
            if comm_stream is None:
                low, high = torch.cuda.Stream.priority_range()
                comm_stream = torch.cuda.Stream(device=device, priority=min(low, high))
            self.comm_stream = comm_stream

    def compute(self) -> contextlib.AbstractContextManager[Any]:
        """Run on the compute stream (inside a ``with``)."""
        return torch.cuda.stream(self.compute_stream) if self.cuda else contextlib.nullcontext()

    def comm(self) -> contextlib.AbstractContextManager[Any]:
        """Run on the comm stream (inside a ``with``)."""
        return torch.cuda.stream(self.comm_stream) if self.cuda else contextlib.nullcontext()

    def record(self) -> torch.cuda.Event | None:
        """An event on the current stream (inside :meth:`compute` or :meth:`comm`)."""
        if not self.cuda:
            return None
        event = torch.cuda.Event()
        event.record()
        return event

    def wait(self, event: torch.cuda.Event | None) -> None:
        """Make the current stream wait for ``event``."""
        if self.cuda and event is not None:
            torch.cuda.current_stream().wait_event(event)


def run_weave(
    stages: Sequence[Stage],
    hiddens: list[torch.Tensor],
    residuals: list[torch.Tensor],
    comm: CommFn,
    streams: StreamPair,
    *,
    out_buffer: OutFn | None = None,
    trace: list[TraceEvent] | None = None,
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Run ``stages`` over the splits with the weave schedule; returns final hiddens/residuals.

    ``hiddens[s]`` is split ``s``'s normalised input to the first stage, ``residuals[s]`` its
    residual (sharded or replicated, as ``comm`` expects). On return the compute stream has
    waited for all communication.
    """
    num_splits = len(hiddens)
    if num_splits != len(residuals) or num_splits == 0:
        raise TokenWeaveError(f"need one residual per split, got {num_splits}/{len(residuals)}")
    comm_done: list[torch.cuda.Event | None] = [None] * num_splits
    for stage in stages:
        for s in range(num_splits):
            with streams.compute():
                streams.wait(comm_done[s])
                out = out_buffer(s, hiddens[s].shape[0]) if out_buffer is not None else None
                partial = stage.compute(s, hiddens[s], out)
                computed = streams.record()
            if trace is not None:
                trace.append(TraceEvent("compute", stage.name, stage.layer, s))
            with streams.comm():
                streams.wait(computed)
                if streams.cuda and out is None:
                    # Allocated on the compute stream, consumed on the comm stream.
                    partial.record_stream(torch.cuda.current_stream())
                hiddens[s], residuals[s] = comm(s, partial, residuals[s], stage.norm_weight)
                comm_done[s] = streams.record()
            if trace is not None:
                trace.append(TraceEvent("comm", stage.name, stage.layer, s))
    with streams.compute():
        for event in comm_done:
            streams.wait(event)
    return hiddens, residuals


_CHECKED: set[tuple[str, int]] = set()


def check_consistent(
    decision: Decision, group: dist.ProcessGroup | None = None, *, force: bool = False
) -> None:
    """Raise unless every rank of ``group`` took the same decision.

    Checked once per token count (the cache key must not depend on the decision itself, or a
    rank whose decision differs would enter the collective alone); ``force`` always checks.
    """
    pg = group if group is not None else dist.group.WORLD
    assert pg is not None
    key = (pg.group_name, decision.num_tokens)
    if key in _CHECKED and not force:
        return
    world = dist.get_world_size(pg)
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend(
        pg
    ) == "nccl" else torch.device("cpu")
    mine = torch.tensor(decision.as_tuple(), dtype=torch.int64, device=device)
    parts = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(parts, mine, group=pg)
    seen = [tuple(int(v) for v in p.tolist()) for p in parts]
    if any(s != seen[0] for s in seen):
        raise TokenWeaveError(
            f"ranks disagree on the split decision (tokens, weave, split, ctas): {seen}; "
            "every rank must load the same table"
        )
    _CHECKED.add(key)
