"""Every benchmark scenario: shapes, seeded routing draws, bytes, FLOPs, floors (docs/benchmarking.md).

Pure Python + PyTorch on the CPU, so the scenario math is testable without a GPU. Routing draws
use a CPU generator seeded from (base seed, scenario id, draw kind): every implementation, every
machine and every rerun sees the same routing.

Floor of one GEMM: ``max(bytes / copy bandwidth, FLOP / bf16 matrix rate)`` with
bytes = int4 weights + bf16 group scales of the experts that received rows (0.5625 B per weight)
+ activations read once + outputs written once (bf16, unreduced). A scenario's floor is the sum
over its two GEMMs (gate_up and down), each at its own bound.
"""

from __future__ import annotations

import fnmatch
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch

from chord_kernels import ChordInputError

HIDDEN = 7168
"""Kimi K2.x hidden size H."""
MOE_INTERMEDIATE = 2048
"""Kimi K2.x routed-expert intermediate size I."""
GLOBAL_EXPERTS = 384
TOP_K = 8

WEIGHT_BYTES_PER_PARAM = 0.5625
"""int4 code (0.5 B) + one bf16 scale per 32 weights (0.0625 B)."""
ACT_BYTES = 2
"""bf16 activations and outputs."""
SKEW_FACTOR = 8
"""In the skewed draw one expert receives this many times the average rows."""
DRAWS = ("uniform", "skewed")


@dataclass(frozen=True)
class Ceilings:
    """Copy bandwidth and bf16 matrix rate a floor is computed against."""

    copy_tbps: float
    bf16_tflops: float
    source: str


NOMINAL_H200 = Ceilings(4.27, 790.0, "nominal H200: copy and bf16 GEMM measured 2026-11-30")
"""Used when no measurement is at hand (listing scenarios, CPU tests)."""


@dataclass(frozen=True)
class GemmShape:
    """One projection of one expert: weight ``[N, K]``."""

    name: str
    n: int
    k: int


@dataclass(frozen=True)
class Scenario:
    """One benchmark point: a MoE layer's two GEMMs at one routed-row count.

    ``family`` is ``"indexed"`` (vLLM routing), ``"contiguous"`` or ``"masked"`` (grouped SM90
    layouts). ``parallel`` is ``"ep"`` (expert parallelism: the rows this GPU's local experts
    receive, pre-dispatched, ``top_k = 1``) or ``"tp"`` (tensor parallelism: tokens with
    ``top_k = 8`` distinct experts each). ``tokens`` counts the routing rows (rows for EP, tokens
    for TP). ``profile`` is the chord-kernels packing profile of its weights.
    """

    id: str
    family: str
    parallel: str
    series: str
    """Plot line group: scenarios of one series share weights and differ only in rows."""
    profile: str
    num_experts: int
    gate_up: GemmShape
    down: GemmShape
    tokens: int
    top_k: int
    rows_per_expert: int | None = None
    """Contiguous scenarios: rows every expert receives under the uniform draw."""
    expert_max_tokens: int | None = None
    """Masked scenarios: rows per expert in the buffer (DeepEP low-latency's per-expert capacity)."""
    note: str = ""

    @property
    def gemms(self) -> tuple[GemmShape, GemmShape]:
        return (self.gate_up, self.down)

    @property
    def num_slots(self) -> int:
        """Routed (token, expert) pairs: rows of the down GEMM (``valid_shape_m`` in vLLM)."""
        return self.tokens * self.top_k

    @property
    def tok_e(self) -> float:
        """Average routed rows per local expert (what decides the best schedule)."""
        return self.num_slots / self.num_experts

    @property
    def grouped(self) -> bool:
        return self.family in ("contiguous", "masked")


def _ep_shapes() -> tuple[GemmShape, GemmShape]:
    return GemmShape("gate_up", 2 * MOE_INTERMEDIATE, HIDDEN), GemmShape("down", HIDDEN, MOE_INTERMEDIATE)


def _tp_shapes(tp: int = 8) -> tuple[GemmShape, GemmShape]:
    inter = MOE_INTERMEDIATE // tp
    return GemmShape("gate_up", 2 * inter, HIDDEN), GemmShape("down", HIDDEN, inter)


EP_PROFILE = "h200_ep8"
"""Packing profile of every EP scenario (EP16/EP32 experts have the same shapes as EP8's)."""
TP_PROFILE = "h200_tp8"
MASKED_EXPERT_MAX_TOKENS = 256
"""Per-expert rows of the masked buffer (DeepEP low-latency's per-expert receive capacity)."""


def _build_registry() -> dict[str, Scenario]:
    scenarios: list[Scenario] = []
    ep_up, ep_down = _ep_shapes()
    for sid, rows, note in (
        ("ep8_decode", 160, "20 tok/GPU x 8 GPUs x top-8 / 8"),
        ("ep8_tok16", 768, ""),
        ("ep8_tok43", 2064, ""),
        ("ep8_tok128", 6144, ""),
        ("ep8_tok341", 16368, ""),
    ):
        scenarios.append(Scenario(sid, "indexed", "ep", "ep8", EP_PROFILE, 48, ep_up, ep_down, rows, 1, note=note))
    tp_up, tp_down = _tp_shapes(8)
    for sid, tokens in (("tp8_decode160", 160), ("tp8_1024", 1024), ("tp8_8192", 8192)):
        scenarios.append(
            Scenario(sid, "indexed", "tp", "tp8", TP_PROFILE, GLOBAL_EXPERTS, tp_up, tp_down, tokens, TOP_K)
        )
    for m in (8, 16, 32, 64):
        scenarios.append(Scenario(
            f"ep8_masked{m}", "masked", "ep", "ep8_masked", EP_PROFILE, 48, ep_up, ep_down, 48 * m, 1,
            expert_max_tokens=MASKED_EXPERT_MAX_TOKENS,
            note=f"48 x {m} rows uniform over experts, {MASKED_EXPERT_MAX_TOKENS} rows per expert buffer",
        ))
    for ep in (8, 16, 32):
        experts = GLOBAL_EXPERTS // ep
        for rows in (128, 256, 512):
            scenarios.append(Scenario(
                f"ep{ep}_contig{rows}", "contiguous", "ep", f"ep{ep}_contig", EP_PROFILE,
                experts, ep_up, ep_down, experts * rows, 1, rows_per_expert=rows,
                note="rows per expert aligned to 128",
            ))
    return {s.id: s for s in scenarios}


SCENARIOS: dict[str, Scenario] = _build_registry()
"""All scenarios by id: indexed (EP8, TP8), masked, then contiguous."""

_GROUP_ALIASES = {
    "all": lambda s: True,
    "indexed": lambda s: s.family == "indexed",
    "grouped": lambda s: s.grouped,
    "contiguous": lambda s: s.family == "contiguous",
    "masked": lambda s: s.family == "masked",
}


def select(patterns: Sequence[str] | None = None) -> list[Scenario]:
    """Scenarios matching any pattern: an id, a glob (``ep8_*``), a series or a family alias.

    Aliases: ``all``, ``indexed``, ``grouped``, ``contiguous``, ``masked``. No patterns means all.
    Order follows the registry; an unmatched pattern is an error naming the known ids.
    """
    if not patterns:
        return list(SCENARIOS.values())
    chosen: set[str] = set()
    for pattern in patterns:
        for part in (p.strip() for p in pattern.split(",")):
            if not part:
                continue
            alias = _GROUP_ALIASES.get(part)
            hits = [s.id for s in SCENARIOS.values()
                    if (alias(s) if alias else fnmatch.fnmatchcase(s.id, part) or s.series == part)]
            if not hits:
                raise ChordInputError(
                    f"scenario {part!r} matches nothing; known: {', '.join(SCENARIOS)} "
                    f"(or {', '.join(_GROUP_ALIASES)}, a series, or a glob)"
                )
            chosen.update(hits)
    return [s for s in SCENARIOS.values() if s.id in chosen]


# --------------------------------------------------------------------------- routing draws


@dataclass(frozen=True)
class RoutingDraw:
    """One seeded routing of a scenario, on the CPU (move tensors as needed).

    ``topk_ids`` int32 ``[rows, top_k]`` holds local expert ids (every id is local: EP rows are
    pre-dispatched). ``topk_weights`` float32 ``[rows, top_k]`` multiply the down GEMM of indexed
    scenarios. ``counts`` int64 ``[E]`` are the routed rows per expert.
    """

    scenario_id: str
    draw: str
    seed: int
    topk_ids: torch.Tensor
    topk_weights: torch.Tensor
    counts: torch.Tensor
    hot_expert: int | None

    @property
    def experts_used(self) -> int:
        return int((self.counts > 0).sum())


def draw_seed(base_seed: int, scenario_id: str, draw: str) -> int:
    """Per-(scenario, draw) seed, stable across processes and machines."""
    return (base_seed * 1_000_003 + zlib.crc32(f"{scenario_id}/{draw}".encode())) % (2**63)


def hot_rows(average: float, cap: int | None = None) -> int:
    """Rows of the skewed draw's hot expert: :data:`SKEW_FACTOR` x ``average`` (at most ``cap``)."""
    rows = max(1, round(SKEW_FACTOR * average))
    return rows if cap is None else min(rows, cap)


def single_expert_rows(rows: int, experts: int, draw: str, gen: torch.Generator,
                       cap: int | None = None) -> tuple[torch.Tensor, int | None]:
    """``rows`` expert ids in ``[0, experts)`` on ``gen``'s device, and the hot expert (None when
    uniform): uniform, or one hot expert with 8x the average (at most ``cap`` rows: a masked
    buffer holds no more per expert)."""
    device = gen.device
    if draw == "uniform":
        return torch.randint(0, experts, (rows,), generator=gen, device=device), None
    hot = int(torch.randint(0, experts, (1,), generator=gen, device=device))
    n_hot = min(rows, hot_rows(rows / experts, cap))
    others = torch.randint(0, experts - 1, (rows - n_hot,), generator=gen, device=device)
    others = others + (others >= hot).to(others.dtype)  # skip the hot expert
    ids = torch.cat([torch.full((n_hot,), hot, dtype=others.dtype, device=device), others])
    return ids[torch.randperm(rows, generator=gen, device=device)], hot


def pin_hot_expert(scores: torch.Tensor, hot: int, n_hot: int, gen: torch.Generator) -> None:
    """Make expert ``hot`` the top score of ``n_hot`` random rows of ``scores`` ([tokens, experts],
    values in [0, 1]) and the lowest of every other row, so that a top-k over the rows picks it
    exactly ``n_hot`` times."""
    scores[:, hot] = -1.0
    scores[torch.randperm(scores.shape[0], generator=gen, device=scores.device)[:n_hot], hot] = 2.0


def _topk_rows(tokens: int, experts: int, top_k: int, draw: str, gen: torch.Generator) -> tuple[torch.Tensor, int | None]:
    """Each token picks ``top_k`` distinct experts: uniformly, or with one hot expert at 8x average."""
    scores = torch.rand(tokens, experts, generator=gen)
    hot = None
    if draw == "skewed":
        hot = int(torch.randint(0, experts, (1,), generator=gen))
        pin_hot_expert(scores, hot, min(tokens, hot_rows(tokens * top_k / experts)), gen)
    return scores.topk(top_k, dim=1).indices, hot


def _balanced_rows(experts: int, per_expert: int, gen: torch.Generator) -> torch.Tensor:
    ids = torch.arange(experts).repeat_interleave(per_expert)
    return ids[torch.randperm(ids.numel(), generator=gen)]


def draw_routing(scenario: Scenario, draw: str = "uniform", seed: int = 0) -> RoutingDraw:
    """The seeded routing of ``scenario`` (``draw`` is ``"uniform"`` or ``"skewed"``).

    Uniform: EP/grouped rows pick an expert uniformly at random (contiguous scenarios give every
    expert exactly ``rows_per_expert`` rows); TP tokens pick ``top_k`` distinct experts uniformly.
    Skewed: one expert (drawn) receives 8x the average rows (masked: at most ``expert_max_tokens``),
    the rest are uniform over the others.
    """
    if draw not in DRAWS:
        raise ChordInputError(f"draw: expected one of {list(DRAWS)}, got {draw!r}")
    s = draw_seed(seed, scenario.id, draw)
    gen = torch.Generator().manual_seed(s)
    experts = scenario.num_experts
    hot: int | None
    if scenario.top_k > 1:
        ids, hot = _topk_rows(scenario.tokens, experts, scenario.top_k, draw, gen)
        weights = torch.rand(ids.shape, generator=gen) + 0.05
        weights = weights / weights.sum(dim=1, keepdim=True)
    else:
        if scenario.family == "contiguous" and draw == "uniform":
            flat, hot = _balanced_rows(experts, scenario.rows_per_expert or 0, gen), None
        else:
            flat, hot = single_expert_rows(scenario.tokens, experts, draw, gen, scenario.expert_max_tokens)
        ids = flat.unsqueeze(1)
        weights = torch.rand(ids.shape, generator=gen) * 0.9 + 0.1
    ids = ids.to(torch.int32)
    counts = torch.bincount(ids.reshape(-1).to(torch.int64), minlength=experts)
    return RoutingDraw(scenario.id, draw, seed, ids, weights.float(), counts, hot)


# --------------------------------------------------------------------------- bytes, FLOPs, floors


@dataclass(frozen=True)
class GemmCost:
    """Bytes and FLOPs one GEMM cannot avoid."""

    name: str
    n: int
    k: int
    experts_used: int
    rows_in: int
    """Activation rows read once."""
    rows_out: int
    """Output rows written once (real routed rows; padding excluded)."""

    @property
    def weight_bytes(self) -> float:
        return WEIGHT_BYTES_PER_PARAM * self.n * self.k * self.experts_used

    @property
    def act_bytes(self) -> int:
        return ACT_BYTES * self.rows_in * self.k

    @property
    def out_bytes(self) -> int:
        return ACT_BYTES * self.rows_out * self.n

    @property
    def bytes(self) -> float:
        return self.weight_bytes + self.act_bytes + self.out_bytes

    @property
    def flops(self) -> int:
        return 2 * self.rows_out * self.n * self.k

    def memory_us(self, ceilings: Ceilings) -> float:
        return self.bytes / (ceilings.copy_tbps * 1e12) * 1e6

    def compute_us(self, ceilings: Ceilings) -> float:
        return self.flops / (ceilings.bf16_tflops * 1e12) * 1e6

    def floor_us(self, ceilings: Ceilings = NOMINAL_H200) -> float:
        return max(self.memory_us(ceilings), self.compute_us(ceilings))

    def bound(self, ceilings: Ceilings = NOMINAL_H200) -> str:
        return "memory" if self.memory_us(ceilings) >= self.compute_us(ceilings) else "compute"


def gemm_costs(scenario: Scenario, counts: torch.Tensor | Sequence[int]) -> tuple[GemmCost, GemmCost]:
    """Costs of (gate_up, down) given routed rows per expert.

    gate_up reads each token once (TP: ``tokens`` rows feed ``top_k`` slots each); down reads one
    row per slot. Both write one row per slot (the down output is unreduced).
    """
    counts_list = [int(c) for c in (counts.tolist() if isinstance(counts, torch.Tensor) else counts)]
    if len(counts_list) != scenario.num_experts:
        raise ChordInputError(
            f"counts: expected {scenario.num_experts} experts for {scenario.id}, got {len(counts_list)}"
        )
    used = sum(1 for c in counts_list if c > 0)
    slots = sum(counts_list)
    tokens_in = slots // scenario.top_k
    up, down = scenario.gemms
    return (GemmCost(up.name, up.n, up.k, used, tokens_in, slots),
            GemmCost(down.name, down.n, down.k, used, slots, slots))


def expected_experts_used(scenario: Scenario) -> float:
    """Expected experts with at least one row under the uniform draw."""
    e = scenario.num_experts
    if scenario.family == "contiguous":
        return float(e)
    if scenario.top_k > 1:
        return e * (1.0 - (1.0 - scenario.top_k / e) ** scenario.tokens)
    return e * (1.0 - (1.0 - 1.0 / e) ** scenario.tokens)


def expected_floor_us(scenario: Scenario, ceilings: Ceilings = NOMINAL_H200) -> float:
    """Floor of the layer (gate_up + down) with the expected number of experts used (uniform)."""
    used = expected_experts_used(scenario)
    total = 0.0
    for shape, rows_in in ((scenario.gate_up, scenario.tokens), (scenario.down, scenario.num_slots)):
        cost = GemmCost(shape.name, shape.n, shape.k, 0, rows_in, scenario.num_slots)
        memory = (WEIGHT_BYTES_PER_PARAM * shape.n * shape.k * used + cost.act_bytes + cost.out_bytes) / (
            ceilings.copy_tbps * 1e12)
        total += max(memory * 1e6, cost.compute_us(ceilings))
    return total


def layer_floor_us(costs: Iterable[GemmCost], ceilings: Ceilings = NOMINAL_H200) -> float:
    """Sum of per-GEMM floors."""
    return sum(c.floor_us(ceilings) for c in costs)


def describe(scenario: Scenario, ceilings: Ceilings = NOMINAL_H200) -> str:
    """One line for ``--list``."""
    up, down = scenario.gemms
    return (
        f"{scenario.id:<15} {scenario.family:<10} E={scenario.num_experts:<4} "
        f"gate_up {up.n}x{up.k}  down {down.n}x{down.k}  rows={scenario.tokens:<6} "
        f"top_k={scenario.top_k} tok_e={scenario.tok_e:7.1f}  "
        f"floor~{expected_floor_us(scenario, ceilings):7.1f} us"
    )


__all__ = [
    "DRAWS",
    "EP_PROFILE",
    "MASKED_EXPERT_MAX_TOKENS",
    "NOMINAL_H200",
    "SCENARIOS",
    "TP_PROFILE",
    "Ceilings",
    "GemmCost",
    "GemmShape",
    "RoutingDraw",
    "Scenario",
    "describe",
    "draw_routing",
    "draw_seed",
    "expected_experts_used",
    "expected_floor_us",
    "gemm_costs",
    "hot_rows",
    "layer_floor_us",
    "pin_hot_expert",
    "select",
    "single_expert_rows",
]
