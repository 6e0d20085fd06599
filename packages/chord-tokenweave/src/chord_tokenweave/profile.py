"""Offline profiler: measure split offsets and CTA counts per token count, write the JSON table.

For each token count ``T`` it times the model's fused-only path for each candidate CTA count, then
the woven path at the wave-aware split and its neighbours (± ``align``, and the plain half), all
with the best CTA count. The weave is enabled at ``T`` when it beats fused-only by ``margin``; the
threshold is the smallest ``T`` from which it always wins (selective enabling). Every time is the
maximum over ranks, so all ranks compute the same table; rank 0 writes it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist

from chord_tokenweave.model import TPModel
from chord_tokenweave.table import Decision, SplitTable, TableEntry, choose_threshold


def time_us(
    fn: Callable[[], Any], *, device: torch.device, warmup: int = 2, reps: int = 5,
    group: dist.ProcessGroup | None = None,
) -> float:
    """Median wall time of ``fn`` in µs (CUDA events on GPU), maximum over the ranks of ``group``.

    Ranks line up on a barrier before each repetition so the slowest rank is what is measured.
    """
    distributed = dist.is_available() and dist.is_initialized()
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(reps):
        if distributed:
            dist.barrier(group=group)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) * 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - t0) * 1e6)
    value = statistics.median(samples)
    if distributed:
        t = torch.tensor([value], dtype=torch.float64,
                         device=device if device.type == "cuda" else "cpu")
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
        value = float(t.item())
    return value


def candidate_splits(num_tokens: int, wave_split: int | None, align: int) -> list[int]:
    """The wave-aware split, its ±align neighbours and the aligned half (deduplicated)."""
    half = max(align, round(num_tokens / 2 / align) * align)
    cands = [] if wave_split is None else [wave_split, wave_split - align, wave_split + align]
    cands.append(half)
    out: list[int] = []
    for c in cands:
        if 0 < c < num_tokens and c not in out:
            out.append(c)
    return out


def profile_model(
    model: TPModel,
    token_counts: Sequence[int],
    *,
    cta_candidates: Sequence[int] = (8, 16, 32),
    align: int = 128,
    num_sms: int = 132,
    margin: float = 0.02,
    warmup: int = 1,
    reps: int = 3,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> SplitTable:
    """Measure and return the table (collective: every rank calls with the same arguments)."""
    device = model.device
    gen = torch.Generator(device=device).manual_seed(seed)
    entries: dict[int, TableEntry] = {}
    wins: dict[int, bool] = {}
    gpu = device.type == "cuda"
    if gpu and model.distributed:
        model.workspace(max(token_counts))
    for num_tokens in sorted(token_counts):
        x = torch.randn(num_tokens, model.cfg.hidden, generator=gen, device=device).to(model.dtype)
        times: dict[str, float] = {}
        best_ctas, best_fused = cta_candidates[0], float("inf")
        for ctas in cta_candidates if gpu else cta_candidates[:1]:
            d = Decision(num_tokens, False, None, ctas, None)
            t = time_us(lambda d=d, x=x: model.forward(x, "tokenweave", decision=d),
                        device=device, warmup=warmup, reps=reps)
            times[f"fused_ctas{ctas}"] = t
            if t < best_fused:
                best_fused, best_ctas = t, ctas
        times["fused_only"] = best_fused
        wave = model.decide(num_tokens, threshold=0, num_sms=num_sms).split
        best_split, best_weave = None, float("inf")
        for split in candidate_splits(num_tokens, wave, align):
            d = Decision(num_tokens, True, split, best_ctas, None)
            t = time_us(lambda d=d, x=x: model.forward(x, "tokenweave", decision=d),
                        device=device, warmup=warmup, reps=reps)
            times[f"weave_split{split}"] = t
            if t < best_weave:
                best_weave, best_split = t, split
        if best_split is not None:
            times["tokenweave"] = best_weave
        win = best_split is not None and best_weave < best_fused * (1 - margin)
        wins[num_tokens] = win
        entries[num_tokens] = TableEntry(best_split, best_ctas, win, times)
        if log is not None:
            log(f"T={num_tokens}: fused-only {best_fused:.1f} us (ctas {best_ctas}), weave "
                f"{best_weave:.1f} us at split {best_split} -> {'weave' if win else 'fused-only'}")
    return SplitTable(
        entries=entries,
        threshold=choose_threshold(wins),
        world_size=model.world_size,
        hidden=model.cfg.hidden,
        model=model.cfg.name,
        device=torch.cuda.get_device_name(device) if gpu else "cpu",
        align=align,
        meta={"num_layers": len(model.layers), "margin": margin, "num_sms": num_sms,
              "cta_candidates": list(cta_candidates), "torch": torch.__version__},
    )
