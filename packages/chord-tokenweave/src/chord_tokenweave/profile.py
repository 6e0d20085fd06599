"""Offline profiler: measure split offsets and CTA counts per token count, write the JSON table.

For each token count ``T`` it times the model's fused-only path for each candidate CTA count, then
the woven path at the wave-aware split for each CTA count, and at its neighbours (± ``align``, and
the plain half) with the best of those, and the library all-reduce + add-RMSNorm. On GPU every
time is a CUDA-graph replay (one forward per graph): eager timing measures Python and launch
overhead, which the weave doubles. The weave is enabled at ``T`` when it beats fused-only by
``margin``; the library path (``library``) where it beats whichever of the two was chosen, so the
table's path is never slower than the sequential baseline as measured. The threshold is the
smallest ``T`` from which the weave always wins (selective enabling). Every time is the maximum
over ranks, so all ranks compute the same table; rank 0 writes it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from chord_tokenweave.model import TPModel
from chord_tokenweave.table import Decision, SplitTable, TableEntry, choose_threshold
from chord_tokenweave.timing import time_call


def time_us(fn: Callable[[], Any], *, device: torch.device, warmup: int, reps: int,
            graph: bool) -> float:
    """µs per call of ``fn``, one call per CUDA graph (see :mod:`chord_tokenweave.timing`)."""
    return time_call(fn, device=device, warmup=warmup, reps=reps, graph=graph)[0]


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
    graph: bool = True,
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
                        device=device, warmup=warmup, reps=reps, graph=graph)
            times[f"fused_ctas{ctas}"] = t
            if t < best_fused:
                best_fused, best_ctas = t, ctas
        times["fused_only"] = best_fused
        wave = model.decide(num_tokens, threshold=0, num_sms=num_sms).split
        best_split, best_weave, weave_ctas = None, float("inf"), best_ctas

        def weave(split: int, ctas: int, x: torch.Tensor = x, n: int = num_tokens) -> float:
            d = Decision(n, True, split, ctas, None)
            return time_us(lambda: model.forward(x, "tokenweave", decision=d),
                           device=device, warmup=warmup, reps=reps, graph=graph)

        splits = candidate_splits(num_tokens, wave, align)
        # The CTA count matters more under overlap (the comm kernel's CTAs take SMs from the
        # concurrent GEMM), so it is chosen again for the weave, at the wave-aware split.
        for ctas in cta_candidates if gpu and splits else cta_candidates[:1] if splits else ():
            t = times[f"weave_split{splits[0]}_ctas{ctas}"] = weave(splits[0], ctas)
            if t < best_weave:
                best_weave, best_split, weave_ctas = t, splits[0], ctas
        for split in splits[1:]:
            t = times[f"weave_split{split}_ctas{weave_ctas}"] = weave(split, weave_ctas)
            if t < best_weave:
                best_weave, best_split = t, split
        if best_split is not None:
            times["tokenweave"] = best_weave
        # The library path too: selective enabling falls back to it where it is fastest, so
        # the table's path is never slower than the sequential baseline (as measured).
        times["sequential"] = time_us(lambda x=x: model.forward(x, "sequential"), device=device,
                                      warmup=warmup, reps=reps, graph=graph)
        win = best_split is not None and best_weave < best_fused * (1 - margin)
        library = times["sequential"] < (best_weave if win else best_fused)
        wins[num_tokens] = win and not library
        entries[num_tokens] = TableEntry(best_split, weave_ctas if win else best_ctas, win, times,
                                         library=library)
        if log is not None:
            choice = "library" if library else "weave" if win else "fused-only"
            log(f"T={num_tokens}: sequential {times['sequential']:.1f} us, fused-only "
                f"{best_fused:.1f} us (ctas {best_ctas}), weave {best_weave:.1f} us at split "
                f"{best_split} ctas {weave_ctas} -> {choice}")
    return SplitTable(
        entries=entries,
        threshold=choose_threshold(wins),
        world_size=model.world_size,
        hidden=model.cfg.hidden,
        model=model.cfg.name,
        device=torch.cuda.get_device_name(device) if gpu else "cpu",
        align=align,
        meta={"num_layers": len(model.layers), "margin": margin, "num_sms": num_sms,
              "cta_candidates": list(cta_candidates), "torch": torch.__version__,
              "timing": "cuda-graph" if graph and gpu else "eager"},
    )
