"""Materialize a scenario on a device: weights, activations, routing and the reference output.

A :class:`GemmProblem` is one GEMM (gate_up or down) of one scenario under one routing draw.
Weights are drawn directly on the target device (``random_quantized`` with a device generator) and
shared by every scenario of a series; activations are fresh per problem. The expected output comes
from :mod:`chord_kernels.reference` (the numerics contract) and is computed once per problem.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import torch

from chord_bench.scenarios import (
    GemmCost,
    GemmShape,
    RoutingDraw,
    Scenario,
    draw_routing,
    draw_seed,
    gemm_costs,
)
from chord_kernels import reference
from chord_kernels.formats import random_quantized
from chord_kernels.routing import (
    AlignedRouting,
    ContiguousRouting,
    MaskedRouting,
    align_block_size,
    contiguous_layout,
    masked_layout,
)

REFERENCE_BLOCK_M = 16
"""block_m of the routing handed to the reference (any value gives the same result)."""


@dataclass
class WeightSet:
    """Random int4 weights of one projection for all local experts, in compressed-tensors form."""

    num_experts: int
    n: int
    k: int
    seed: int
    packed: torch.Tensor
    scales: torch.Tensor
    _bf16: torch.Tensor | None = field(default=None, repr=False)

    @classmethod
    def random(cls, num_experts: int, n: int, k: int, *, seed: int, device: torch.device) -> WeightSet:
        gen = torch.Generator(device=device).manual_seed(seed)
        packed, scales = random_quantized(num_experts, n, k, generator=gen, device=device)
        return cls(num_experts, n, k, seed, packed, scales)

    @property
    def key(self) -> tuple[int, int, int, int, str]:
        return (self.num_experts, self.n, self.k, self.seed, str(self.packed.device))

    def dequantized(self) -> torch.Tensor:
        """bf16 ``[E, N, K]`` (exact reference dequant), computed once."""
        if self._bf16 is None:
            self._bf16 = reference.dequantize_weight((self.packed, self.scales))
        return self._bf16


@dataclass
class SortedRows:
    """The routed rows of a problem grouped by expert (what a grouped GEMM consumes).

    Row ``i`` of expert-sorted order reads ``a_flat[a_rows[i]]``, is multiplied by
    ``row_scale[i]`` (if any) and lands in output row ``out_rows[i]``; ``counts[e]`` rows per expert.
    """

    a_rows: torch.Tensor
    out_rows: torch.Tensor
    counts: list[int]
    row_scale: torch.Tensor | None


@dataclass
class GemmProblem:
    """One GEMM of one scenario, ready to run.

    Indexed: ``a`` is ``[rows, K]`` and output row ``t`` (a slot) reads ``a[t // addr_top_k]``
    (gate_up: ``addr_top_k = scenario.top_k``; down: 1, ``a`` holds one row per slot and
    ``topk_weights`` scale the accumulator). Contiguous: ``a`` is ``[padded rows, K]`` with
    ``layout.m_indices``. Masked: ``a`` is ``[G, max_m, K]`` with ``layout.masked_m``.
    """

    scenario: Scenario
    draw: RoutingDraw
    shape: GemmShape
    weight: WeightSet
    a: torch.Tensor
    topk_ids: torch.Tensor
    topk_weights: torch.Tensor | None
    layout: ContiguousRouting | MaskedRouting | None
    cost: GemmCost
    layer: tuple[WeightSet, WeightSet] | None = None  # the scenario's (gate_up, down) weights
    _reference: torch.Tensor | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.shape.name

    @property
    def family(self) -> str:
        return self.scenario.family

    @property
    def is_down(self) -> bool:
        return self.shape.name == "down"

    @property
    def routing_top_k(self) -> int:
        """top_k of the routing draw (8 for TP, 1 for pre-dispatched EP rows)."""
        return self.topk_ids.shape[1]

    @property
    def addr_top_k(self) -> int:
        """Slot ``t`` reads activation row ``t // addr_top_k``."""
        return 1 if self.is_down else self.routing_top_k

    @property
    def num_slots(self) -> int:
        return self.topk_ids.numel()

    @property
    def num_experts(self) -> int:
        return self.weight.num_experts

    def aligned(self, block_m: int) -> AlignedRouting:
        """vLLM routing tensors (``moe_align_block_size``) for this problem at ``block_m``.

        Indexed problems align their top-k ids. Grouped problems list their real rows only, each
        as a top-1 slot indexing ``a_flat()`` (sentinel: ``output_rows()``), as vLLM's batched
        alignment does for a DeepEP low-latency buffer: padding rows are never read or written.
        """
        if self.layout is None:
            return align_block_size(self.topk_ids, block_m, self.num_experts)
        rows = self.sorted_rows()
        device = self.a.device
        experts = torch.repeat_interleave(torch.arange(self.num_experts, device=device),
                                          torch.tensor(rows.counts, device=device))
        routing = align_block_size(experts.to(torch.int32).unsqueeze(1), block_m, self.num_experts)
        # Entry i < n names the i-th real row; the sentinel n becomes this layout's sentinel.
        lookup = torch.cat([rows.a_rows.to(device), torch.tensor([self.output_rows()], device=device)])
        sorted_ids = lookup[routing.sorted_token_ids.long()].to(torch.int32)
        return dataclasses.replace(routing, sorted_token_ids=sorted_ids, num_slots=self.output_rows())

    def output_rows(self) -> int:
        """Rows of the output in this problem's own layout."""
        if self.layout is None:
            return self.num_slots
        if isinstance(self.layout, ContiguousRouting):
            return self.layout.m_indices.numel()
        return self.layout.row_slots.numel()

    def valid_rows(self) -> torch.Tensor:
        """bool ``[output_rows]``: rows an implementation must get right (others are undefined)."""
        if self.layout is None:
            return torch.ones(self.num_slots, dtype=torch.bool, device=self.a.device)
        if isinstance(self.layout, ContiguousRouting):
            return self.layout.m_indices >= 0
        return (self.layout.row_slots >= 0).reshape(-1)

    def sorted_rows(self) -> SortedRows:
        """Routed rows grouped by expert; real rows only (no padding)."""
        if self.layout is None:
            experts = self.topk_ids.reshape(-1).to(torch.int64)
            order = torch.argsort(experts, stable=True)
            scale = None if self.topk_weights is None else self.topk_weights.reshape(-1)[order]
            counts = torch.bincount(experts, minlength=self.num_experts).tolist()
            return SortedRows(order // self.addr_top_k, order, counts, scale)
        if isinstance(self.layout, ContiguousRouting):
            rows = torch.nonzero(self.layout.m_indices >= 0).squeeze(1)
            counts = torch.bincount(self.layout.m_indices[rows].long(), minlength=self.num_experts)
            return SortedRows(rows, rows, counts.tolist(), None)
        flat = torch.nonzero((self.layout.row_slots >= 0).reshape(-1)).squeeze(1)
        return SortedRows(flat, flat, self.layout.masked_m.tolist(), None)

    def a_flat(self) -> torch.Tensor:
        """Activations as ``[rows, K]`` (masked problems are flattened)."""
        return self.a.reshape(-1, self.a.shape[-1])

    def reference(self) -> torch.Tensor:
        """Expected bf16 output ``[output_rows, N]`` from :mod:`chord_kernels.reference` (cached)."""
        if self._reference is None:
            w = self.weight.dequantized()
            if self.layout is None:
                r = self.aligned(REFERENCE_BLOCK_M)
                self._reference = reference.indexed_gemm(
                    self.a, w, r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded,
                    block_m=REFERENCE_BLOCK_M, top_k=self.addr_top_k, topk_weights=self.topk_weights,
                )
            elif isinstance(self.layout, ContiguousRouting):
                self._reference = reference.grouped_contiguous(self.a, w, self.layout.m_indices)
            else:
                self._reference = reference.grouped_masked(self.a, w, self.layout.masked_m)
        return self._reference


def build_problems(
    scenario: Scenario,
    draw: RoutingDraw,
    weights: tuple[WeightSet, WeightSet],
    *,
    seed: int,
    device: torch.device,
) -> tuple[GemmProblem, GemmProblem]:
    """(gate_up, down) problems of ``scenario`` under ``draw`` with fresh random activations."""
    gen = torch.Generator(device=device).manual_seed(seed)
    topk_ids = draw.topk_ids.to(device)
    topk_weights = draw.topk_weights.to(device)
    costs = gemm_costs(scenario, draw.counts)
    problems = []
    for shape, weight, cost in zip(scenario.gemms, weights, costs, strict=True):
        layout: ContiguousRouting | MaskedRouting | None = None
        if scenario.family == "indexed":
            rows = scenario.tokens if shape.name == "gate_up" else scenario.num_slots
            a = torch.randn(rows, shape.k, generator=gen, device=device).to(torch.bfloat16)
            scale = topk_weights if shape.name == "down" else None
        else:
            dense = torch.randn(scenario.tokens, shape.k, generator=gen, device=device).to(torch.bfloat16)
            if scenario.family == "contiguous":
                layout = contiguous_layout(topk_ids, scenario.num_experts)
            else:
                layout = masked_layout(topk_ids, scenario.num_experts, max_m=scenario.expert_max_tokens)
            a = layout.gather(dense)
            scale = None
        problems.append(GemmProblem(scenario, draw, shape, weight, a, topk_ids, scale, layout, cost, weights))
    return problems[0], problems[1]


class WeightCache:
    """Seeded random weights of the scenario at hand; moving to other shapes frees them first.

    Weights depend only on (base seed, experts, N, K), so every run, machine and tool (the
    harness, ``ci/``) draws the same ones. ``generation`` counts how often they were replaced.
    """

    def __init__(self, seed: int, device: torch.device) -> None:
        self.seed, self.device = seed, device
        self.current: dict[tuple[int, int, int], WeightSet] = {}
        self.generation = 0

    def get(self, scenario: Scenario) -> tuple[WeightSet, WeightSet]:
        keys = [(scenario.num_experts, g.n, g.k) for g in scenario.gemms]
        if set(keys) != set(self.current):
            self.current.clear()
            if self.device.type == "cuda":
                torch.cuda.empty_cache()
            for e, n, k in keys:
                seed = draw_seed(self.seed, f"weights/{e}x{n}x{k}", "w")
                self.current[(e, n, k)] = WeightSet.random(e, n, k, seed=seed, device=self.device)
            self.generation += 1
        return self.current[keys[0]], self.current[keys[1]]


def scenario_problems(scenario: Scenario, draw: str, seed: int, weights: WeightCache
                      ) -> tuple[RoutingDraw, tuple[GemmProblem, GemmProblem]]:
    """The seeded routing draw of ``scenario`` and its (gate_up, down) problems on ``weights``'
    device: what the harness times, and what ``ci/`` sweeps and profiles."""
    routing = draw_routing(scenario, draw, seed)
    problems = build_problems(scenario, routing, weights.get(scenario),
                              seed=draw_seed(seed, scenario.id, draw + "/act"), device=weights.device)
    return routing, problems


def check_output(out: torch.Tensor, problem: GemmProblem, *, rel_l2: float = 1e-2, max_rel: float = 5e-2) -> str | None:
    """None if ``out`` matches the reference on the valid rows, else the reason.

    ``rel_l2``: ``||out - ref|| / ||ref||`` bound; ``max_rel``: largest absolute error over the
    largest reference magnitude. bf16 rounding alone gives ~4e-3 relative per element, while a
    wrong tile, a wrong expert or a wrong scale breaks one bound or the other by orders of magnitude.
    """
    ref = problem.reference()
    rows = problem.output_rows()
    if out.numel() != rows * problem.shape.n:
        return f"output has {out.numel()} elements, expected {rows} x {problem.shape.n}"
    valid = problem.valid_rows()
    got = out.reshape(rows, problem.shape.n)[valid].float()
    want = ref[valid].float()
    if not torch.isfinite(got).all():
        return "output has NaN/Inf"
    diff = got - want
    scale = want.abs().max().clamp_min(1e-6)
    err_l2 = float(diff.norm() / want.norm().clamp_min(1e-6))
    err_max = float(diff.abs().max() / scale)
    if err_l2 > rel_l2 or err_max > max_rel:
        return f"mismatch vs reference: rel L2 {err_l2:.2e} (limit {rel_l2:.0e}), max {err_max:.2e} (limit {max_rel:.0e})"
    return None
