"""``python -m chord_bench.layer``: the whole Kimi K2 MoE layer on one of eight GPUs, Chord against
what vLLM 0.33 runs without it -- humming-kernels' GEMMs with vLLM's separate steps around them.

The experts' part of the layer, from routed tokens to ``[M, H]`` (routing tensors and permutation
indices built before timing, as vLLM builds its routing before the experts):

- **Chord**: ``indexed.moe_experts`` -- ``indexed.fused_moe`` without its routing step, on the
  routing block ``fused_moe`` chooses: gate_up with SiLU-and-mul (fused into the WGMMA kernel's
  epilogue, its rows written in routing order there), then down x top-k weight (loading those rows
  block by block) and the top-k sum; under expert parallelism with ``expert_map``, the partial sum
  over the rank's experts that vLLM's reduce-scatter adds up.
- **humming indexed** (vLLM's ``HummingIndexedExperts``; under expert parallelism with
  ``VLLM_HUMMING_MOE_GEMM_TYPE=indexed``): gate_up (humming ``indexed``, routing at the block size
  of gate_up's heuristic range, non-local slots left out as ``ignore_invalid_experts`` does),
  SiLU-and-mul, down (unweighted; the routing re-aligned when down's range asks for another block
  size), then the top-k weighted sum of the local slots.
- **humming grouped_contiguous** (vLLM 0.33's ``HummingGroupedExperts``, its default under expert
  parallelism): ``moe_permute`` (the local slots' rows copied into expert order, no padding),
  gate_up, SiLU-and-mul and down on humming ``grouped_contiguous``, then ``moe_unpermute`` (each
  token's weighted sum gathered back from the permuted rows).
- **DeepEP low latency** (``ep8_masked*``, the batched format ``[E_local, capacity, H]`` with
  ``expert_num_tokens`` rows each; DeepEP's combine weights and sums): Chord's batched experts
  (``indexed.gemm_masked`` gate_up with SiLU-and-mul fused, then down, as chord-vllm runs them)
  against vLLM's ``BatchedHummingGroupedExperts`` -- humming ``grouped_masked`` gate_up,
  SiLU-and-mul over the whole ``[E_local x capacity, 2I]`` buffer (vLLM's ``apply_activation``
  takes the workspace as it is), ``grouped_masked`` down.

The small steps are one-pass stand-ins for vLLM's kernels (vLLM pins another torch than the
benchmark machines run): ``index_select`` for the permute, Triton for the rest
(:mod:`chord_bench.layer_kernels`). Every layer is checked against
:func:`chord_kernels.reference.moe_layer` on fresh random data (outputs poisoned first), then all
are timed as CUDA graphs in alternating rounds, each humming step also alone; the ratio is against
the faster humming path.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

import chord_kernels
from chord_bench.peers.humming import (
    COMPUTE_CONFIG,
    HummingKernels,
    HummingWeight,
    indexed_block_sizes,
    range_for,
)
from chord_bench.problems import WeightSet
from chord_bench.runner import environment
from chord_bench.scenarios import (
    DRAWS,
    EP_PROFILE,
    GLOBAL_EXPERTS,
    HIDDEN,
    MASKED_EXPERT_MAX_TOKENS,
    MOE_INTERMEDIATE,
    NOMINAL_H200,
    TOP_K,
    TP_PROFILE,
    hot_rows,
    pin_hot_expert,
    single_expert_rows,
)
from chord_bench.timing import interleaved
from chord_kernels import ChordInputError, ChordUnsupportedError, reference
from chord_kernels.indexed import MaskedRows, gemm_masked, layer_block_m, moe_experts
from chord_kernels.routing import align_block_size

RANKS = 8
"""GPUs the layer is spread over (tensor or expert parallel)."""


@dataclass(frozen=True)
class LayerScenario:
    """A batch of ``tokens`` on one rank: ``tp8`` -- every rank holds all 384 experts' slices of
    I / 8 channels; ``ep8`` -- rank 0 holds experts 0-47 whole and every token (vLLM's
    all-gather dispatch), routed over the 384 global experts; ``ep8_ll`` (DeepEP low latency) --
    the same experts, ``tokens`` dispatched rows spread over them in ``capacity``-row buffers."""

    tokens: int
    parallel: str
    capacity: int = 0
    """``ep8_ll`` (DeepEP low latency): rows per expert of the batched buffer."""

    @property
    def batched(self) -> bool:
        return self.parallel == "ep8_ll"

    @property
    def local_experts(self) -> int:
        return GLOBAL_EXPERTS if self.parallel == "tp8" else GLOBAL_EXPERTS // RANKS

    @property
    def intermediate(self) -> int:
        return MOE_INTERMEDIATE // RANKS if self.parallel == "tp8" else MOE_INTERMEDIATE

    @property
    def profile(self) -> str:
        return TP_PROFILE if self.parallel == "tp8" else EP_PROFILE

    @property
    def local_slots(self) -> int:
        """Expected routed rows on the rank's experts (vLLM's ``estimate_local_valid_shape_m``;
        batched: the dispatched rows)."""
        if self.batched:
            return self.tokens
        return math.ceil(self.tokens * TOP_K * self.local_experts / GLOBAL_EXPERTS)

    @property
    def humming_paths(self) -> tuple[str, ...]:
        """The humming paths vLLM 0.33 runs here: ``indexed`` under TP; under EP
        ``grouped_contiguous`` (its default) or ``indexed`` (by environment variable); under DeepEP
        low latency ``grouped_masked``."""
        if self.batched:
            return ("grouped_masked",)
        return ("indexed",) if self.parallel == "tp8" else ("indexed", "grouped_contiguous")

    def expert_map(self, device: torch.device) -> torch.Tensor | None:
        """Global expert id -> local id or -1 (linear placement, rank 0); None under TP."""
        if self.parallel == "tp8":
            return None
        emap = torch.full((GLOBAL_EXPERTS,), -1, dtype=torch.int32, device=device)
        emap[: self.local_experts] = torch.arange(self.local_experts, dtype=torch.int32, device=device)
        return emap


LAYER_SCENARIOS: dict[str, LayerScenario] = {
    "tp8_decode160": LayerScenario(160, "tp8"),
    "tp8_512": LayerScenario(512, "tp8"),
    "tp8_1024": LayerScenario(1024, "tp8"),
    "tp8_2304": LayerScenario(2304, "tp8"),
    "tp8_4096": LayerScenario(4096, "tp8"),
    "tp8_5120": LayerScenario(5120, "tp8"),
    "tp8_6144": LayerScenario(6144, "tp8"),
    "tp8_8192": LayerScenario(8192, "tp8"),
    "tp8_12288": LayerScenario(12288, "tp8"),
    "ep8_tok5": LayerScenario(240, "ep8"),
    "ep8_tok8": LayerScenario(384, "ep8"),
    "ep8_tok12": LayerScenario(576, "ep8"),
    "ep8_tok43": LayerScenario(2064, "ep8"),
    "ep8_tok48": LayerScenario(2304, "ep8"),
    "ep8_tok128": LayerScenario(6144, "ep8"),
    "ep8_tok341": LayerScenario(16368, "ep8"),
    **{f"ep8_masked{m}": LayerScenario(48 * m, "ep8_ll", MASKED_EXPERT_MAX_TOKENS) for m in (8, 16, 32, 48, 64)},
    "ep8_masked16_cap2048": LayerScenario(48 * 16, "ep8_ll", 2048),
}
"""Scenario id -> batch. EP: the GEMM harness's ep8_tok* rows per expert, as whole layers; DeepEP
low latency: its ep8_masked* rows (48 x m over the 48 experts) in 256-row buffers, and once in the
buffers of vLLM's defaults (256 tokens per rank x 8 dispatchers). tp8_2304, ep8_tok48 and
ep8_masked48 (48 rows per expert) sit where the routing block is ``PREFILL_BLOCK_STAND_IN``;
ep8_tok5 and ep8_tok8 where it is 16 tokens (the down on the decode kernel with row widths)."""
TOLERANCE = 2e-2
"""Relative Frobenius error against the reference above which a layer's output is wrong."""
HUMMING_STEPS: dict[str, tuple[str, ...]] = {
    "indexed": ("gate_up", "silu_and_mul", "down", "mul_sum"),
    "grouped_contiguous": ("permute", "gate_up", "silu_and_mul", "down", "unpermute"),
    "grouped_masked": ("gate_up", "silu_and_mul", "down"),
}
"""Each humming path's steps, in order."""

Log = Callable[[str], None]


@dataclass
class LayerResult:
    """One scenario: µs per layer (median of the interleaved rounds) and what was run."""

    scenario: str
    tokens: int
    chord_us: float
    humming_us: dict[str, float]
    humming_steps_us: dict[str, dict[str, float]]
    rel_err: dict[str, float]
    chord_block_m: int
    humming_configs: dict[str, list[dict]] = field(default_factory=dict)
    humming_bound_us: dict[str, float] = field(default_factory=dict)
    """Per path: its GEMMs as measured, its other steps at the copy floor (bytes / 4.27 TB/s):
    what no implementation of vLLM's small kernels can beat."""
    draw: str = "uniform"
    """The routing draw (:func:`draw_topk`, :func:`draw_counts`)."""

    @property
    def best_path(self) -> str:
        """The faster humming path (what a user would pick)."""
        return min(self.humming_us, key=self.humming_us.__getitem__)

    @property
    def ratio(self) -> float:
        """The faster humming layer's µs / Chord's (> 1: Chord is faster)."""
        return self.humming_us[self.best_path] / self.chord_us

    @property
    def bound_ratio(self) -> float:
        """The fastest humming path's bound / Chord's µs: the ratio if vLLM's small steps ran at
        the copy floor (falls back to :attr:`ratio` without a bound)."""
        return min(self.humming_bound_us.values()) / self.chord_us if self.humming_bound_us else self.ratio


def select(ids: Sequence[str] | None) -> list[str]:
    """The scenario ids to run (all when ``ids`` is empty), in their canonical order."""
    if not ids:
        return list(LAYER_SCENARIOS)
    unknown = [i for i in ids if i not in LAYER_SCENARIOS]
    if unknown:
        raise ChordInputError(f"unknown layer scenario(s) {unknown}: expected some of {list(LAYER_SCENARIOS)}")
    return [i for i in LAYER_SCENARIOS if i in ids]


class _Weights:
    """The rank's random int4 weights, packed for Chord and transformed for humming once."""

    def __init__(self, lib: HummingKernels, scenario: LayerScenario, seed: int, device: torch.device) -> None:
        experts, inter = scenario.local_experts, scenario.intermediate
        self.w13_set = WeightSet.random(experts, 2 * inter, HIDDEN, seed=seed + 1, device=device)
        self.w2_set = WeightSet.random(experts, HIDDEN, inter, seed=seed + 2, device=device)
        self.w13 = chord_kernels.pack("indexed", self.w13_set.packed, self.w13_set.scales, profile=scenario.profile)
        self.w2 = chord_kernels.pack("indexed", self.w2_set.packed, self.w2_set.scales, profile=scenario.profile)
        self.hw13, self.hw2 = lib.weight(self.w13_set), lib.weight(self.w2_set)

    def humming_configs(self, lib: HummingKernels, gemm_type: str, slots: int) -> tuple[int, int, dict, dict]:
        """vLLM's choice for ``slots`` local rows on one path: the routing blocks of gate_up and
        down (indexed) and the two configurations."""
        ranges13 = lib.ranges(self.hw13.layer_config, gemm_type)
        ranges2 = lib.ranges(self.hw2.layer_config, gemm_type)
        picked = range_for(ranges13, slots), range_for(ranges2, slots)
        if picked[0] is None or picked[1] is None:
            raise ChordUnsupportedError(f"none of humming's {gemm_type} ranges holds valid_shape_m={slots}")
        b13, b2 = (indexed_block_sizes(ranges13, ranges2, slots)[:2] if gemm_type == "indexed" else (0, 0))
        return b13, b2, picked[0][2], picked[1][2]


def draw_topk(tokens: int, local_experts: int, draw: str, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Routing of ``tokens`` over the 384 global experts on ``gen``'s device: the top-k of a
    softmax over random logits (weights: those probabilities, as vLLM's top-k). ``skewed``: one of
    the rank's ``local_experts`` (drawn) is in exactly :func:`~chord_bench.scenarios.hot_rows`
    tokens' top-k -- 8x its average -- and in no other token's, as in the GEMM harness's draw."""
    probs = torch.softmax(torch.randn(tokens, GLOBAL_EXPERTS, device=gen.device, generator=gen), dim=-1)
    scores = probs
    if draw == "skewed":
        hot = int(torch.randint(0, local_experts, (1,), device=gen.device, generator=gen))
        scores = probs.clone()
        pin_hot_expert(scores, hot, min(tokens, hot_rows(tokens * TOP_K / GLOBAL_EXPERTS)), gen)
    topk_ids = scores.topk(TOP_K, dim=-1).indices
    return probs.gather(1, topk_ids).float().contiguous(), topk_ids.to(torch.int32).contiguous()


def draw_counts(rows: int, experts: int, capacity: int, draw: str, gen: torch.Generator) -> torch.Tensor:
    """DeepEP low latency's valid rows per expert (int32, at most ``capacity`` each) for ``rows``
    dispatched rows, drawn as the GEMM harness draws them
    (:func:`~chord_bench.scenarios.single_expert_rows`)."""
    pick, _ = single_expert_rows(rows, experts, draw, gen, capacity)
    return torch.bincount(pick, minlength=experts).clamp_max(capacity).to(torch.int32)


def local_routing(topk_ids: torch.Tensor, block_m: int, expert_map: torch.Tensor | None, experts: int):
    """vLLM's ``moe_align_block_size(..., ignore_invalid_experts=True)`` for humming: the local
    slots only (non-local ones sorted behind every local block, past ``num_tokens_post_padded``)."""
    if expert_map is None:
        return align_block_size(topk_ids, block_m, experts)
    local = expert_map[topk_ids.long()]
    local = torch.where(local < 0, experts, local).to(torch.int32)
    route = align_block_size(local, block_m, experts + 1)
    counts = torch.bincount(local.reshape(-1).long(), minlength=experts + 1)[:experts]
    route.num_tokens_post_padded.copy_(((counts + block_m - 1) // block_m * block_m).sum().reshape(1))
    return route


def permutation(topk_ids: torch.Tensor, expert_map: torch.Tensor | None,
                experts: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """vLLM's ``moe_permute`` indices: the local slots in expert order (slot order within an
    expert, no padding) as ``(source token of each permuted row, int64 offsets [experts + 1],
    permuted row of each slot or -1)``."""
    flat = topk_ids.reshape(-1).long()
    local = flat if expert_map is None else expert_map[flat].long()
    slot = torch.arange(flat.numel(), device=flat.device)
    order = torch.argsort(torch.where(local >= 0, local, experts) * flat.numel() + slot)
    order = order[: int((local >= 0).sum())]
    counts = torch.bincount(local[order], minlength=experts)
    offsets = torch.nn.functional.pad(counts.cumsum(0), (1, 0))
    positions = torch.full((flat.numel(),), -1, dtype=torch.int32, device=flat.device)
    positions[order] = torch.arange(order.numel(), dtype=torch.int32, device=flat.device)
    return (order // topk_ids.shape[1]).contiguous(), offsets, positions


class _HummingLayer:
    """One humming path's layer on a batch: its steps as callables over preallocated buffers.
    ``topk_ids`` is the routing (``[M, top_k]``), or for ``grouped_masked`` the rows per expert
    (int32 ``[E_local]``, ``hidden`` being the ``[E_local x capacity, H]`` buffer)."""

    def __init__(self, gemm_type: str, scenario: LayerScenario, weights: _Weights, lib: HummingKernels,
                 hidden: torch.Tensor, topk_weights: torch.Tensor, topk_ids: torch.Tensor,
                 expert_map: torch.Tensor | None) -> None:
        from chord_bench import layer_kernels

        dev, tokens, inter = hidden.device, hidden.shape[0], scenario.intermediate
        slots = scenario.local_slots
        b13, b2, cfg13, cfg2 = weights.humming_configs(lib, gemm_type, slots)
        self.configs = [cfg13, cfg2]
        gemm = lib.load()["humming_gemm"]
        common = {"compute_config": json.dumps({**COMPUTE_CONFIG, "gemm_type": gemm_type}),
                  "locks": lib.locks(dev), "valid_shape_m": slots}

        def call(hw: HummingWeight, cfg: dict, **kw) -> Callable[[], None]:
            args = {**common, **kw, "layer_config": hw.layer_str, "tuning_config": json.dumps([[0, 1 << 30, cfg]]),
                    "weight": hw.tensors["weight"], "weight_scale": hw.tensors["weight_scale"]}
            return lambda: gemm(**args)

        # Standard format: [tokens, H] top-k sums; batched: [E_local x capacity, H] rows.
        self.out = torch.empty(tokens, HIDDEN, dtype=torch.bfloat16, device=dev)
        experts = scenario.local_experts
        if gemm_type == "indexed":
            r13 = local_routing(topk_ids, b13, expert_map, experts)
            r2 = r13 if b2 == b13 else local_routing(topk_ids, b2, expert_map, experts)
            rows = tokens * TOP_K
            gate_up = torch.empty(rows, 2 * inter, dtype=torch.bfloat16, device=dev)
            act = torch.empty(rows, inter, dtype=torch.bfloat16, device=dev)
            down = torch.empty(rows, HIDDEN, dtype=torch.bfloat16, device=dev)
            # Slot s's down row is row s; vLLM's moe_fused_mul_sum skips non-local slots.
            positions = torch.arange(rows, dtype=torch.int32, device=dev)
            if expert_map is not None:
                positions[expert_map[topk_ids.reshape(-1).long()] < 0] = -1
            local = rows if expert_map is None else int((positions >= 0).sum())
            self.small_bytes = {"silu_and_mul": rows * 3 * inter * 2, "mul_sum": (local + tokens) * HIDDEN * 2}
            self.steps = {
                "gate_up": call(weights.hw13, cfg13, inputs=hidden, outputs=gate_up, sorted_ids=r13.sorted_token_ids,
                                expert_ids=r13.expert_ids, num_tokens_padded=r13.num_tokens_post_padded, top_k=TOP_K),
                "silu_and_mul": lambda: layer_kernels.silu_and_mul(gate_up, act),
                "down": call(weights.hw2, cfg2, inputs=act, outputs=down, sorted_ids=r2.sorted_token_ids,
                             expert_ids=r2.expert_ids, num_tokens_padded=r2.num_tokens_post_padded, top_k=1),
                "mul_sum": lambda: layer_kernels.gather_mul_sum(down, positions, topk_weights, self.out),
            }
        elif gemm_type == "grouped_masked":
            rows = hidden.shape[0]  # [E_local x capacity, H]; topk_ids: the rows per expert, int32 [E_local]
            gate_up = torch.empty(rows, 2 * inter, dtype=torch.bfloat16, device=dev)
            act = torch.empty(rows, inter, dtype=torch.bfloat16, device=dev)
            self.small_bytes = {"silu_and_mul": rows * 3 * inter * 2}
            self.steps = {
                "gate_up": call(weights.hw13, cfg13, inputs=hidden, outputs=gate_up, expert_layout=topk_ids, top_k=1),
                "silu_and_mul": lambda: layer_kernels.silu_and_mul(gate_up, act),
                "down": call(weights.hw2, cfg2, inputs=act, outputs=self.out, expert_layout=topk_ids, top_k=1),
            }
        else:
            src_tokens, offsets, positions = permutation(topk_ids, expert_map, experts)
            rows = max(1, src_tokens.numel())
            permuted = torch.empty(rows, HIDDEN, dtype=torch.bfloat16, device=dev)
            gate_up = torch.empty(rows, 2 * inter, dtype=torch.bfloat16, device=dev)
            act = torch.empty(rows, inter, dtype=torch.bfloat16, device=dev)
            down = torch.empty(rows, HIDDEN, dtype=torch.bfloat16, device=dev)
            local = src_tokens.numel()
            self.small_bytes = {"permute": 2 * local * HIDDEN * 2, "silu_and_mul": local * 3 * inter * 2,
                                "unpermute": (local + tokens) * HIDDEN * 2}
            self.steps = {
                "permute": lambda: torch.index_select(hidden, 0, src_tokens, out=permuted[: src_tokens.numel()]),
                "gate_up": call(weights.hw13, cfg13, inputs=permuted, outputs=gate_up, expert_layout=offsets, top_k=1),
                "silu_and_mul": lambda: layer_kernels.silu_and_mul(gate_up, act),
                "down": call(weights.hw2, cfg2, inputs=act, outputs=down, expert_layout=offsets, top_k=1),
                "unpermute": lambda: layer_kernels.gather_mul_sum(down, positions, topk_weights, self.out),
            }

    def __call__(self) -> None:
        for step in self.steps.values():
            step()

    def bound_us(self, steps_us: dict[str, float]) -> float:
        """The layer with its GEMMs as measured and every other step at the copy floor."""
        floor = {step: b / (NOMINAL_H200.copy_tbps * 1e6) for step, b in self.small_bytes.items()}
        return sum(floor.get(step, us) for step, us in steps_us.items())


def _check_and_time(name: str, layers: dict[str, tuple[Callable[[], None], torch.Tensor]], want: torch.Tensor,
                    rows: torch.Tensor | None, humming: dict[str, _HummingLayer], rounds: int,
                    ) -> tuple[dict[str, float], dict[str, float], dict[str, dict[str, float]]]:
    """Run every layer once on a poisoned output and check ``rows`` of it (all when None) against
    ``want``; then time the layers and humming's steps interleaved and check that Chord's output did
    not change. Returns (relative errors, µs per layer, µs per humming path and step)."""
    def checked(out: torch.Tensor) -> torch.Tensor:
        return out if rows is None else out[rows]

    errors: dict[str, float] = {}
    for label, (fn, out) in layers.items():
        out.fill_(float("nan"))
        fn()
        torch.cuda.synchronize()
        err = ((checked(out).float() - want).norm() / want.norm()).item()
        if not math.isfinite(err) or err > TOLERANCE:
            raise AssertionError(f"{name}: the {label} layer differs from the reference (relative error {err:.3g})")
        errors[label] = err
    chord_layer, chord_out = layers["chord"]
    first = checked(chord_out).clone()
    timed: dict[str, Callable[[], None]] = {label: fn for label, (fn, _) in layers.items()}
    for path, h in humming.items():
        timed.update({f"{path}/{step}": fn for step, fn in h.steps.items()})
    timers = interleaved(timed, rounds=rounds)
    chord_layer()
    torch.cuda.synchronize()
    if not torch.equal(first, checked(chord_out)):
        raise AssertionError(f"{name}: the Chord layer's output changed across the timed replays")
    us = {k: t.median_us() for k, t in timers.items()}
    steps = {p: {s: us[f"{p}/{s}"] for s in HUMMING_STEPS[p]} for p in humming}
    return errors, {label: us[label] for label in layers}, steps


def _layer(name: str, scenario: LayerScenario, weights: _Weights, lib: HummingKernels, seed: int, rounds: int,
           device: torch.device, draw: str) -> LayerResult:
    tokens = scenario.tokens
    gen = torch.Generator(device=device).manual_seed(seed + tokens)
    hidden = (torch.randn(tokens, HIDDEN, device=device, generator=gen) * 0.5).to(torch.bfloat16)
    topk_weights, topk_ids = draw_topk(tokens, scenario.local_experts, draw, gen)
    expert_map = scenario.expert_map(device)
    w13, w2 = weights.w13, weights.w2

    slots = scenario.local_slots
    block_m = layer_block_m(w13, w2, slots)  # indexed.fused_moe's choice
    route = align_block_size(topk_ids, block_m, GLOBAL_EXPERTS, expert_map)
    rargs = (route.sorted_token_ids, route.expert_ids, route.num_tokens_post_padded)
    chord_out = torch.empty(tokens, HIDDEN, dtype=torch.bfloat16, device=device)

    def chord_layer() -> None:
        moe_experts(hidden, w13, w2, rargs, topk_weights, topk_ids, block_m=block_m, expert_map=expert_map,
                    out=chord_out)

    humming = {path: _HummingLayer(path, scenario, weights, lib, hidden, topk_weights, topk_ids, expert_map)
               for path in scenario.humming_paths}

    want = reference.moe_layer(hidden, (weights.w13_set.packed, weights.w13_set.scales),
                               (weights.w2_set.packed, weights.w2_set.scales), topk_weights, topk_ids,
                               global_num_experts=GLOBAL_EXPERTS, expert_map=expert_map).float()
    layers = {"chord": (chord_layer, chord_out), **{f"humming_{p}": (h, h.out) for p, h in humming.items()}}
    errors, us, steps = _check_and_time(name, layers, want, None, humming, rounds)
    return LayerResult(name, tokens, us["chord"], {p: us[f"humming_{p}"] for p in humming}, steps, errors, block_m,
                       {p: h.configs for p, h in humming.items()}, {p: h.bound_us(steps[p]) for p, h in humming.items()},
                       draw)


def _batched_layer(name: str, scenario: LayerScenario, weights: _Weights, lib: HummingKernels, seed: int,
                   rounds: int, device: torch.device, draw: str) -> LayerResult:
    """DeepEP low latency: ``[E_local, capacity, H]`` rows, ``counts[e]`` of them valid per expert."""
    experts, cap = scenario.local_experts, scenario.capacity
    gen = torch.Generator(device=device).manual_seed(seed + scenario.tokens)
    hidden = (torch.randn(experts * cap, HIDDEN, device=device, generator=gen) * 0.5).to(torch.bfloat16)
    counts = draw_counts(scenario.tokens, experts, cap, draw, gen)
    w13, w2 = weights.w13, weights.w2
    block_m = layer_block_m(w13, w2, scenario.tokens)  # chord-vllm's
    groups = MaskedRows(counts, cap)
    act = torch.empty(experts * cap, scenario.intermediate, dtype=torch.bfloat16, device=device)
    chord_out = torch.empty(experts * cap, HIDDEN, dtype=torch.bfloat16, device=device)

    def chord_layer() -> None:
        gemm_masked(hidden, w13, groups, block_m=block_m, out=act, activation="silu", expected_m=scenario.tokens / experts)
        gemm_masked(act, w2, groups, block_m=block_m, out=chord_out, expected_m=scenario.tokens / experts)

    humming = _HummingLayer("grouped_masked", scenario, weights, lib, hidden, torch.empty(0), counts, None)
    valid = (torch.arange(cap, device=device)[None, :] < counts[:, None].long()).reshape(-1)
    rows = valid.nonzero().reshape(-1)
    ids = (rows // cap).to(torch.int32).reshape(-1, 1)
    want = reference.moe_layer(hidden[rows], (weights.w13_set.packed, weights.w13_set.scales),
                               (weights.w2_set.packed, weights.w2_set.scales),
                               torch.ones(rows.numel(), 1, device=device), ids).float()
    layers = {"chord": (chord_layer, chord_out), "humming_grouped_masked": (humming, humming.out)}
    errors, us, steps = _check_and_time(name, layers, want, rows, {"grouped_masked": humming}, rounds)
    return LayerResult(name, scenario.tokens, us["chord"], {"grouped_masked": us["humming_grouped_masked"]}, steps,
                       errors, block_m, {"grouped_masked": humming.configs},
                       {"grouped_masked": humming.bound_us(steps["grouped_masked"])}, draw)


def _compile_ahead(lib: HummingKernels, plans: dict[tuple[str, str], dict[str, dict]], device: torch.device,
                   log: Log) -> None:
    """Compile every humming kernel the scenarios will launch, a thread per (layer, gemm type)."""
    count = sum(len(c) for c in plans.values())
    log(f"humming: compiling {count} kernels in {len(plans)} groups")
    with ThreadPoolExecutor(max_workers=8) as pool:
        futures = [pool.submit(lib.compile, layer, gemm_type, [[0, 1 << 30, c] for c in configs.values()], device)
                   for (layer, gemm_type), configs in plans.items()]
        for future in futures:
            future.result()


def run(ids: Sequence[str] | None = None, *, seed: int = 0, rounds: int = 5, device: str = "cuda",
        log: Log = print, draw: str = "uniform") -> list[LayerResult]:
    """Check and time the layer scenarios ``ids`` (all when empty) on the routing ``draw``
    (:data:`~chord_bench.scenarios.DRAWS`); needs CUDA and humming-kernels."""
    names = select(ids)
    if draw not in DRAWS:
        raise ChordInputError(f"draw: expected one of {list(DRAWS)}, got {draw!r}")
    if not torch.cuda.is_available():
        raise ChordUnsupportedError("the layer benchmark needs a CUDA GPU")
    lib = HummingKernels()
    why = lib.unavailable()
    if why:
        raise ChordUnsupportedError(f"humming: {why}")
    dev = torch.device(device)
    weights: dict[str, _Weights] = {}
    plans: dict[tuple[str, str], dict[str, dict]] = {}
    for name in names:
        s = LAYER_SCENARIOS[name]
        if s.profile not in weights:
            weights[s.profile] = _Weights(lib, s, seed, dev)  # EP and DeepEP low latency share them
        w = weights[s.profile]
        for path in s.humming_paths:
            _, _, cfg13, cfg2 = w.humming_configs(lib, path, s.local_slots)
            for hw, cfg in ((w.hw13, cfg13), (w.hw2, cfg2)):
                plans.setdefault((hw.layer_str, path), {})[json.dumps(cfg, sort_keys=True)] = cfg
    _compile_ahead(lib, plans, dev, log)
    results = []
    for name in names:
        t0 = time.time()
        s = LAYER_SCENARIOS[name]
        r = (_batched_layer if s.batched else _layer)(name, s, weights[s.profile], lib, seed, rounds, dev, draw)
        paths = ", ".join(f"humming {p} {v:.1f} µs" for p, v in r.humming_us.items())
        log(f"{name}: Chord {r.chord_us:.1f} µs, {paths}, {r.ratio:.2f}x ({time.time() - t0:.0f} s)")
        results.append(r)
    return results


def format_table(results: Sequence[LayerResult]) -> str:
    """Markdown: one row per scenario and humming path, µs and the ratio against the faster path
    (> 1: Chord faster)."""
    lines = ["| scenario | tokens | Chord layer (block) | humming path | humming layer | its steps, µs | "
             "humming / Chord | small steps at the floor |", "|---|---|---|---|---|---|---|---|"]
    for r in results:
        for path, total in r.humming_us.items():
            steps = " / ".join(f"{s} {v:.1f}" for s, v in r.humming_steps_us[path].items())
            best = path == r.best_path
            bound = r.humming_bound_us.get(path)
            at_floor = f"{bound:.1f} ({bound / r.chord_us:.2f}×)" if bound is not None else "–"
            scenario = r.scenario if r.draw == "uniform" else f"{r.scenario} ({r.draw})"
            lines.append(f"| {scenario} | {r.tokens} | {r.chord_us:.1f} ({r.chord_block_m}) | {path}"
                         f"{' (faster)' if best and len(r.humming_us) > 1 else ''} | {total:.1f} | {steps} | "
                         f"{total / r.chord_us:.2f}× | {at_floor} |")
    return "\n".join(lines)


def write(results: Sequence[LayerResult], out_dir: Path, env: dict[str, object]) -> dict[str, Path]:
    """``layer.json`` and ``layer.md`` under ``out_dir``, each written whole (temporary name, rename)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    payload = {"environment": env, "tolerance": TOLERANCE,
               "results": [{**asdict(r), "best_path": r.best_path, "ratio": r.ratio, "bound_ratio": r.bound_ratio}
                           for r in results]}
    files = {"json": out_dir / "layer.json", "table": out_dir / "layer.md"}
    for path, text in ((files["json"], json.dumps(payload, indent=1)), (files["table"], format_table(results) + "\n")):
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text)
        tmp.replace(path)
    return files


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m chord_bench.layer",
        description="The whole Kimi K2 MoE layer under TP8, EP8 and DeepEP low latency: Chord against humming-kernels' GEMMs with "
                    "vLLM's steps around them, checked and timed side by side (docs/benchmarking.md).")
    p.add_argument("--scenarios", nargs="+", metavar="ID", help=f"some of {', '.join(LAYER_SCENARIOS)} (default: all)")
    p.add_argument("--out", type=Path, default=Path("bench-results"), help="directory for layer.json and layer.md")
    p.add_argument("--seed", type=int, default=0, help="base seed of weights, activations and routing")
    p.add_argument("--rounds", type=int, default=5, help="alternating timing rounds (default: %(default)s)")
    p.add_argument("--draw", choices=DRAWS, default="uniform",
                   help="routing: uniform, or skewed -- one local expert with 8x the average rows (default: %(default)s)")
    p.add_argument("--device", default="cuda", help="CUDA device (default: %(default)s)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        names = select(args.scenarios)
        results = run(names, seed=args.seed, rounds=args.rounds, device=args.device,
                      log=lambda m: print(m, file=sys.stderr, flush=True), draw=args.draw)
    except (ChordInputError, ChordUnsupportedError) as exc:
        print(f"chord_bench.layer: {exc}", file=sys.stderr)
        return 2
    files = write(results, args.out, environment(torch.device(args.device)))
    print(format_table(results))
    print(f"wrote {files['json']} and {files['table']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
