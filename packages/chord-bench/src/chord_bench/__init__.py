"""Benchmark harness: every performance number Chord publishes comes from here.

``python -m chord_bench`` times Chord's kernels, a bf16-weights ceiling, the pure-PyTorch
reference and peers (``--peer humming=/path``) on the scenarios of BENCHMARKS.md, side by side, on
the same routing draw, with CUDA graphs and medians, after checking every output against the
reference. See docs/benchmarking.md.

Modules: :mod:`.scenarios` (registry, routing draws, bytes/FLOPs/floors; CPU only),
:mod:`.problems` (materialize on a GPU), :mod:`.impls` (implementation interface),
:mod:`.peers` (peer adapters), :mod:`.timing`, :mod:`.ceilings`, :mod:`.runner`,
:mod:`.results` (JSON schema) and :mod:`.report` (table, JSON, PNG).
"""

from __future__ import annotations

from chord_bench.scenarios import SCENARIOS, Scenario, draw_routing, gemm_costs, select

__all__ = ["SCENARIOS", "Scenario", "draw_routing", "gemm_costs", "select"]
