"""chord-bench: the benchmark harness behind every performance number Chord publishes.

``python -m chord_bench`` times Chord's kernels, a bf16-weights ceiling, the pure-PyTorch reference
and installed peers (``--peer humming-kernels``: every humming-kernels path vLLM 0.33 would run)
side by side, on the same routing draw, with CUDA graphs and medians, after checking every output
against the reference. See docs/benchmarking.md.

Modules: :mod:`.scenarios` (registry, routing draws, bytes/FLOPs/floors; CPU only),
:mod:`.problems` (weights, problems, the output check), :mod:`.impls` (implementation interface,
reference, ceiling, Chord),
:mod:`.peers` (peer adapters), :mod:`.timing` (the CUDA-graph timer, also used by ``ci/``),
:mod:`.ceilings`, :mod:`.clocks`, :mod:`.runner`, :mod:`.results` (JSON schema) and
:mod:`.report` (tables, JSON, PNG).
"""

from __future__ import annotations

from chord_bench.scenarios import SCENARIOS, Scenario, draw_routing, gemm_costs, select
from chord_bench.timing import GraphTimer

__version__ = "0.1.0"

__all__ = ["SCENARIOS", "GraphTimer", "Scenario", "__version__", "draw_routing", "gemm_costs", "select"]
