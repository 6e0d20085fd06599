"""Small CPU problems with each registry scenario's family and routing kind (shared by tests)."""

from __future__ import annotations

import dataclasses

import torch

from chord_bench import scenarios as S
from chord_bench.problems import GemmProblem, WeightSet, build_problems

CPU = torch.device("cpu")
SIDS = ["ep8_tok16", "tp8_1024", "ep8_contig128", "ep8_masked8"]
"""One scenario of each kind: EP indexed, TP indexed, contiguous, masked."""


def small(sid: str) -> S.Scenario:
    """A registry scenario with its family and routing kind but tiny shapes."""
    s = S.SCENARIOS[sid]
    experts = 16 if s.top_k > 1 else 6
    rows = {"contiguous": experts * 128, "masked": experts * 5}.get(s.family, 40)
    return dataclasses.replace(
        s, num_experts=experts, gate_up=S.GemmShape("gate_up", 64, 128), down=S.GemmShape("down", 128, 32),
        tokens=rows, rows_per_expert=128 if s.family == "contiguous" else None,
        expert_max_tokens=48 if s.family == "masked" else None,
    )


def problems_for(sid: str, draw: str = "uniform", seed: int = 0) -> tuple[GemmProblem, GemmProblem]:
    s = small(sid)
    weights = tuple(WeightSet.random(s.num_experts, g.n, g.k, seed=seed + 7, device=CPU) for g in s.gemms)
    return build_problems(s, S.draw_routing(s, draw, seed), weights, seed=seed + 11, device=CPU)
