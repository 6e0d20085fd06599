"""``python -m chord_bench.layer``: the whole Kimi K2 MoE layer under TP8, Chord against what vLLM
0.33 runs without it -- humming-kernels' GEMMs with separate activation and reduction kernels.

The experts' part of the layer, from routed tokens to ``[M, H]`` (routing tensors built before
timing, as vLLM builds them before the experts):

- **Chord**: ``indexed.moe_experts`` -- ``indexed.fused_moe`` without its routing step, on the
  routing block ``fused_moe`` chooses: gate_up with SiLU-and-mul (fused into the WGMMA kernel's
  epilogue, its rows written in routing order there), then down x top-k weight (loading those rows
  block by block) and the top-k sum.
- **humming**: vLLM's ``HummingIndexedExperts`` order -- gate_up (humming ``indexed``, routing at
  the block size of gate_up's heuristic range), SiLU-and-mul, down (unweighted; the routing
  re-aligned when down's range asks for another block size), then the top-k weighted sum. The two
  small kernels are one-pass Triton stand-ins for vLLM's (:mod:`chord_bench.layer_kernels`).

Both layers are checked against :func:`chord_kernels.reference.moe_layer` on fresh random data
(outputs poisoned first), then timed as CUDA graphs in alternating rounds; humming's four steps
are also timed alone. Under expert parallelism vLLM runs humming's grouped paths behind its own
permute/unpermute, which this comparison does not model (the GEMM harness times them).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

import chord_kernels
from chord_bench.peers.humming import (
    COMPUTE_CONFIG,
    HummingKernels,
    indexed_block_sizes,
    range_for,
)
from chord_bench.problems import WeightSet
from chord_bench.runner import environment
from chord_bench.scenarios import GLOBAL_EXPERTS, HIDDEN, MOE_INTERMEDIATE, TOP_K, TP_PROFILE
from chord_bench.timing import interleaved
from chord_kernels import ChordInputError, ChordUnsupportedError, reference
from chord_kernels.indexed import choose_block_m, moe_experts
from chord_kernels.routing import align_block_size

TP = 8
INTERMEDIATE = MOE_INTERMEDIATE // TP
"""Kimi K2's per-expert intermediate size on one of eight tensor-parallel ranks."""
LAYER_SCENARIOS: dict[str, int] = {"tp8_decode160": 160, "tp8_1024": 1024, "tp8_4096": 4096, "tp8_8192": 8192}
"""Scenario id -> tokens of the batch (every rank holds all 384 experts' slices, top-8 routing)."""
TOLERANCE = 2e-2
"""Relative Frobenius error against the reference above which a layer's output is wrong."""
HUMMING_STEPS = ("gate_up", "silu_and_mul", "down", "mul_sum")

Log = Callable[[str], None]


@dataclass
class LayerResult:
    """One scenario: µs per layer (median of the interleaved rounds) and what was run."""

    scenario: str
    tokens: int
    chord_us: float
    humming_us: float
    humming_steps_us: dict[str, float]
    rel_err: dict[str, float]
    chord_block_m: int
    humming_block_m: tuple[int, int]
    humming_configs: list[dict] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        """humming µs / Chord µs (> 1: Chord is faster)."""
        return self.humming_us / self.chord_us


def select(ids: Sequence[str] | None) -> list[str]:
    """The scenario ids to run (all when ``ids`` is empty), in their canonical order."""
    if not ids:
        return list(LAYER_SCENARIOS)
    unknown = [i for i in ids if i not in LAYER_SCENARIOS]
    if unknown:
        raise ChordInputError(f"unknown layer scenario(s) {unknown}: expected some of {list(LAYER_SCENARIOS)}")
    return [i for i in LAYER_SCENARIOS if i in ids]


class _Weights:
    """The layer's random int4 weights, packed for Chord and transformed for humming once."""

    def __init__(self, lib: HummingKernels, seed: int, device: torch.device) -> None:
        self.w13_set = WeightSet.random(GLOBAL_EXPERTS, 2 * INTERMEDIATE, HIDDEN, seed=seed + 1, device=device)
        self.w2_set = WeightSet.random(GLOBAL_EXPERTS, HIDDEN, INTERMEDIATE, seed=seed + 2, device=device)
        self.w13 = chord_kernels.pack("indexed", self.w13_set.packed, self.w13_set.scales, profile=TP_PROFILE)
        self.w2 = chord_kernels.pack("indexed", self.w2_set.packed, self.w2_set.scales, profile=TP_PROFILE)
        self.hw13, self.hw2 = lib.weight(self.w13_set), lib.weight(self.w2_set)
        self.ranges13 = lib.ranges(self.hw13.layer_config, "indexed")
        self.ranges2 = lib.ranges(self.hw2.layer_config, "indexed")

    def humming_configs(self, slots: int) -> tuple[int, int, dict, dict]:
        """vLLM's choice for ``slots`` routed rows: gate_up's and down's blocks and configurations."""
        b13, b2, _ = indexed_block_sizes(self.ranges13, self.ranges2, slots)
        picked = range_for(self.ranges13, slots), range_for(self.ranges2, slots)
        if picked[0] is None or picked[1] is None:
            raise ChordUnsupportedError(f"none of humming's heuristic ranges holds valid_shape_m={slots}")
        return b13, b2, picked[0][2], picked[1][2]


def _layer(name: str, tokens: int, weights: _Weights, lib: HummingKernels, seed: int, rounds: int,
           device: torch.device) -> LayerResult:
    gen = torch.Generator(device=device).manual_seed(seed + tokens)
    hidden = (torch.randn(tokens, HIDDEN, device=device, generator=gen) * 0.5).to(torch.bfloat16)
    probs = torch.softmax(torch.randn(tokens, GLOBAL_EXPERTS, device=device, generator=gen), dim=-1)
    topk_weights, topk_ids = probs.topk(TOP_K, dim=-1)
    topk_weights, topk_ids = topk_weights.float().contiguous(), topk_ids.to(torch.int32).contiguous()
    slots = tokens * TOP_K
    w13, w2 = weights.w13, weights.w2

    block_m = min(choose_block_m(w13, slots), choose_block_m(w2, slots))  # indexed.fused_moe's choice
    route = align_block_size(topk_ids, block_m, GLOBAL_EXPERTS)
    rargs = (route.sorted_token_ids, route.expert_ids, route.num_tokens_post_padded)
    chord_out = torch.empty(tokens, HIDDEN, dtype=torch.bfloat16, device=device)

    def chord_layer() -> None:
        moe_experts(hidden, w13, w2, rargs, topk_weights, topk_ids, block_m=block_m, out=chord_out)

    from chord_bench import layer_kernels

    b13, b2, cfg13, cfg2 = weights.humming_configs(slots)
    r13 = align_block_size(topk_ids, b13, GLOBAL_EXPERTS)
    r2 = r13 if b2 == b13 else align_block_size(topk_ids, b2, GLOBAL_EXPERTS)
    h_gate_up = torch.empty(slots, 2 * INTERMEDIATE, dtype=torch.bfloat16, device=device)
    h_act = torch.empty(slots, INTERMEDIATE, dtype=torch.bfloat16, device=device)
    h_rows = torch.empty(slots, HIDDEN, dtype=torch.bfloat16, device=device)
    humming_out = torch.empty(tokens, HIDDEN, dtype=torch.bfloat16, device=device)
    humming_gemm = lib.load()["humming_gemm"]
    common = {"compute_config": json.dumps({**COMPUTE_CONFIG, "gemm_type": "indexed"}),
              "locks": lib.locks(device), "valid_shape_m": slots}

    def gate_up() -> None:
        humming_gemm(inputs=hidden, outputs=h_gate_up, sorted_ids=r13.sorted_token_ids, expert_ids=r13.expert_ids,
                     num_tokens_padded=r13.num_tokens_post_padded, top_k=TOP_K, layer_config=weights.hw13.layer_str,
                     tuning_config=json.dumps([[0, 1 << 30, cfg13]]), weight=weights.hw13.tensors["weight"],
                     weight_scale=weights.hw13.tensors["weight_scale"], **common)

    def down() -> None:
        humming_gemm(inputs=h_act, outputs=h_rows, sorted_ids=r2.sorted_token_ids, expert_ids=r2.expert_ids,
                     num_tokens_padded=r2.num_tokens_post_padded, top_k=1, layer_config=weights.hw2.layer_str,
                     tuning_config=json.dumps([[0, 1 << 30, cfg2]]), weight=weights.hw2.tensors["weight"],
                     weight_scale=weights.hw2.tensors["weight_scale"], **common)

    steps = {"gate_up": gate_up, "silu_and_mul": lambda: layer_kernels.silu_and_mul(h_gate_up, h_act),
             "down": down, "mul_sum": lambda: layer_kernels.mul_sum(h_rows, topk_weights, humming_out)}

    def humming_layer() -> None:
        for step in steps.values():
            step()

    want = reference.moe_layer(hidden, (weights.w13_set.packed, weights.w13_set.scales),
                               (weights.w2_set.packed, weights.w2_set.scales), topk_weights, topk_ids).float()
    errors: dict[str, float] = {}
    for label, fn, out in (("chord", chord_layer, chord_out), ("humming", humming_layer, humming_out)):
        out.fill_(float("nan"))
        fn()
        torch.cuda.synchronize()
        err = ((out.float() - want).norm() / want.norm()).item()
        if not math.isfinite(err) or err > TOLERANCE:
            raise AssertionError(f"{name}: the {label} layer differs from the reference (relative error {err:.3g})")
        errors[label] = err
    first = chord_out.clone()
    timers = interleaved({"chord": chord_layer, "humming": humming_layer, **steps}, rounds=rounds)
    chord_layer()
    torch.cuda.synchronize()
    if not torch.equal(first, chord_out):
        raise AssertionError(f"{name}: the Chord layer's output changed across the timed replays")
    us = {k: t.median_us() for k, t in timers.items()}
    return LayerResult(name, tokens, us["chord"], us["humming"], {s: us[s] for s in HUMMING_STEPS}, errors,
                       block_m, (b13, b2), [cfg13, cfg2])


def run(ids: Sequence[str] | None = None, *, seed: int = 0, rounds: int = 5, device: str = "cuda",
        log: Log = print) -> list[LayerResult]:
    """Check and time the layer scenarios ``ids`` (all when empty); needs CUDA and humming-kernels."""
    names = select(ids)
    if not torch.cuda.is_available():
        raise ChordUnsupportedError("the layer benchmark needs a CUDA GPU")
    lib = HummingKernels()
    why = lib.unavailable()
    if why:
        raise ChordUnsupportedError(f"humming: {why}")
    dev = torch.device(device)
    weights = _Weights(lib, seed, dev)
    results = []
    for name in names:
        t0 = time.time()
        r = _layer(name, LAYER_SCENARIOS[name], weights, lib, seed, rounds, dev)
        log(f"{name}: Chord {r.chord_us:.1f} µs, humming + activation + sum {r.humming_us:.1f} µs, "
            f"{r.ratio:.2f}x ({time.time() - t0:.0f} s)")
        results.append(r)
    return results


def format_table(results: Sequence[LayerResult]) -> str:
    """Markdown: one row per scenario, µs and the ratio (> 1: Chord faster)."""
    lines = ["| scenario | tokens | Chord layer (block) | humming layer | humming gate_up / act / down / sum | "
             "humming / Chord |", "|---|---|---|---|---|---|"]
    for r in results:
        parts = " / ".join(f"{r.humming_steps_us[s]:.1f}" for s in HUMMING_STEPS)
        lines.append(f"| {r.scenario} | {r.tokens} | {r.chord_us:.1f} ({r.chord_block_m}) | {r.humming_us:.1f} | "
                     f"{parts} | {r.ratio:.2f}× |")
    return "\n".join(lines)


def write(results: Sequence[LayerResult], out_dir: Path, env: dict[str, object]) -> dict[str, Path]:
    """``layer.json`` and ``layer.md`` under ``out_dir``, each written whole (temporary name, rename)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    payload = {"environment": env, "tolerance": TOLERANCE,
               "results": [{**asdict(r), "ratio": r.ratio} for r in results]}
    files = {"json": out_dir / "layer.json", "table": out_dir / "layer.md"}
    for path, text in ((files["json"], json.dumps(payload, indent=1)), (files["table"], format_table(results) + "\n")):
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text)
        tmp.replace(path)
    return files


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m chord_bench.layer",
        description="The whole Kimi K2 MoE layer under TP8: Chord against humming-kernels' GEMMs with "
                    "vLLM-style activation and top-k sum, checked and timed side by side (docs/benchmarking.md).")
    p.add_argument("--scenarios", nargs="+", metavar="ID", help=f"some of {', '.join(LAYER_SCENARIOS)} (default: all)")
    p.add_argument("--out", type=Path, default=Path("bench-results"), help="directory for layer.json and layer.md")
    p.add_argument("--seed", type=int, default=0, help="base seed of weights, activations and routing")
    p.add_argument("--rounds", type=int, default=5, help="alternating timing rounds (default: %(default)s)")
    p.add_argument("--device", default="cuda", help="CUDA device (default: %(default)s)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        names = select(args.scenarios)
        results = run(names, seed=args.seed, rounds=args.rounds, device=args.device,
                      log=lambda m: print(m, file=sys.stderr, flush=True))
    except (ChordInputError, ChordUnsupportedError) as exc:
        print(f"chord_bench.layer: {exc}", file=sys.stderr)
        return 2
    files = write(results, args.out, environment(torch.device(args.device)))
    print(format_table(results))
    print(f"wrote {files['json']} and {files['table']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
