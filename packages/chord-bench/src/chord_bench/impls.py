"""The implementation interface of the harness and the built-in implementations.

An :class:`Implementation` turns a :class:`~chord_bench.problems.GemmProblem` into one or
more :class:`Candidate` s: everything expensive (packing, routing, dequantizing, compiling)
happens in :meth:`Implementation.candidates`; ``Candidate.run`` is then the only thing timed and
must be CUDA-graph capturable (no host sync, no compile) unless ``graphable=False``.
``Candidate.result`` returns the output in the problem's own layout, outside the timed region.
Several candidates (a peer's configurations) are each checked against the reference; the harness
times the correct ones and keeps the fastest.

New kernels plug in by subclassing :class:`Implementation` and adding an instance to
:func:`builtin_implementations` (or passing it to :func:`chord_bench.runner.run`).
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch

from chord_bench.problems import GemmProblem, WeightSet, check_output
from chord_bench.scenarios import Scenario
from chord_kernels import ChordInputError, reference
from chord_kernels.routing import AlignedRouting


@dataclass
class Candidate:
    """One runnable configuration of an implementation for one problem."""

    config: str
    """Human-readable configuration (``"block_m=16"``, a peer's tile shape...)."""
    run: Callable[[], object]
    """The timed call. Capturable in a CUDA graph when ``graphable``."""
    result: Callable[[], torch.Tensor]
    """Output of the last ``run`` in the problem's layout ``[output_rows, N]`` (untimed)."""
    graphable: bool = True
    error: str | None = None
    """Set when the configuration could not even be built (it is listed as excluded)."""
    detail: dict | None = None
    """The full configuration, kept in the JSON (the table shows ``config``)."""

    def check(self, problem: GemmProblem) -> str | None:
        """Run once, untimed (compiling on first use), and compare with the reference: None when
        the output is right, else why not. Errors propagate to the caller."""
        self.run()
        torch.cuda.synchronize()
        return check_output(self.result(), problem)


class Implementation(ABC):
    """A way to compute the benchmark GEMMs."""

    name: str = ""
    role: str = "chord"
    """``"reference"``, ``"ceiling"``, ``"chord"`` or ``"peer"``."""
    group: str = ""
    """Peers of one group (the paths of one library) are compared as one: Chord's ratio is taken
    against the fastest of them in each scenario."""
    version: str = ""

    def unavailable(self) -> str | None:
        """Why this implementation cannot run at all here (None when it can)."""
        return None

    def unsupported(self, problem: GemmProblem) -> str | None:
        """Why this implementation does not handle ``problem`` (None when it does)."""
        return None

    @abstractmethod
    def candidates(self, problem: GemmProblem) -> Iterator[Candidate]:
        """Prepare once and yield the configurations to check and time."""

    def release(self) -> None:
        """Drop cached per-weight state (called when the harness moves to other weights)."""
        return None

    def warm_up(self, scenarios: Sequence[Scenario], device: torch.device, log: Callable[[str], None]) -> None:
        """Optionally compile ahead, before any timing, what ``scenarios`` will launch."""
        return None

    def describe(self) -> dict[str, str]:
        info = {"name": self.name, "role": self.role, "version": self.version}
        return {**info, "group": self.group} if self.group else info


class ReferenceImpl(Implementation):
    """The pure-PyTorch reference (:mod:`chord_kernels.reference`) on the compressed weights.

    It dequantizes every expert and syncs the host on every call, so it is timed eagerly with CUDA
    events, not in a graph. It is the truth every other implementation is checked against.
    """

    name = "reference"
    role = "reference"

    def candidates(self, problem: GemmProblem) -> Iterator[Candidate]:
        w = (problem.weight.packed, problem.weight.scales)
        out: list[torch.Tensor] = []
        if problem.layout is None:
            r = problem.aligned(16)

            def run() -> None:
                out[:] = [reference.indexed_gemm(
                    problem.a, w, r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded,
                    block_m=16, top_k=problem.addr_top_k, topk_weights=problem.topk_weights,
                )]
        elif problem.family == "contiguous":
            def run() -> None:
                out[:] = [reference.grouped_contiguous(problem.a, w, problem.layout.m_indices)]
        else:
            def run() -> None:
                out[:] = [reference.grouped_masked(problem.a, w, problem.layout.masked_m)]
        yield Candidate("eager, dequantize per call", run, lambda: out[0], graphable=False)


class Bf16CeilingImpl(Implementation):
    """bf16-weights ceiling: weights dequantized once, one grouped GEMM over expert-sorted rows.

    Uses ``torch._grouped_mm`` where available, else one ``torch.mm`` per expert. Rows are
    gathered into expert order (and the down rows pre-multiplied by their top-k weight) during
    preparation, so only the GEMM is timed. It reads 4x the weight bytes of int4, so it is a
    ceiling for compute-bound shapes and a reference point, not a target, for decode.
    """

    name = "bf16-ceiling"
    role = "ceiling"

    def __init__(self, use_grouped_mm: bool | None = None) -> None:
        self.use_grouped_mm = hasattr(torch, "_grouped_mm") if use_grouped_mm is None else use_grouped_mm
        self.version = "torch._grouped_mm" if self.use_grouped_mm else "per-expert torch.mm"
        self._weights: dict[tuple, torch.Tensor] = {}

    def release(self) -> None:
        self._weights.clear()

    def _weight_t(self, weight: WeightSet) -> torch.Tensor:
        # [E, K, N] view of the contiguous [E, N, K] tensor: the column-major B grouped_mm wants.
        if weight.key not in self._weights:
            self._weights[weight.key] = weight.dequantized().transpose(1, 2)
        return self._weights[weight.key]

    def candidates(self, problem: GemmProblem) -> Iterator[Candidate]:
        rows = problem.sorted_rows()
        a = problem.a_flat()[rows.a_rows]
        if rows.row_scale is not None:
            a = (a.float() * rows.row_scale.unsqueeze(1)).to(torch.bfloat16)
        w_t = self._weight_t(problem.weight)
        n = problem.shape.n
        out_rows = problem.output_rows()
        counts = rows.counts
        holder: list[torch.Tensor] = []
        if self.use_grouped_mm:
            offs = torch.tensor(counts, dtype=torch.int64).cumsum(0).to(torch.int32).to(a.device)

            def run() -> None:
                holder[:] = [torch._grouped_mm(a, w_t, offs=offs)]
            config = "torch._grouped_mm"
        else:
            sorted_out = torch.empty(a.shape[0], n, dtype=torch.bfloat16, device=a.device)
            spans = []
            start = 0
            for e, c in enumerate(counts):
                if c:
                    spans.append((e, start, start + c))
                start += c

            def run() -> None:
                for e, s, t in spans:
                    torch.mm(a[s:t], w_t[e], out=sorted_out[s:t])
                holder[:] = [sorted_out]
            config = "per-expert torch.mm"

        def result() -> torch.Tensor:
            full = torch.zeros(out_rows, n, dtype=torch.bfloat16, device=a.device)
            full[rows.out_rows] = holder[0]
            return full

        yield Candidate(config, run, result)


def describe_config(config: object) -> str:
    """``key=value`` of a configuration dataclass (its ``str`` otherwise), for tables."""
    if dataclasses.is_dataclass(config):
        fields = " ".join(f"{k}={v}" for k, v in dataclasses.asdict(config).items())
        return f"{type(config).__name__.removesuffix('Config').lower()} {fields}"
    return str(config)


class ChordIndexedImpl(Implementation):
    """Chord's indexed kernel (``chord_kernels.indexed.gemm``) with the routing vLLM would build.

    Packs with ``chord_kernels.pack("indexed", ..., profile=scenario.profile)``, picks ``block_m``
    with ``chord_kernels.indexed.choose_block_m`` and launches the configuration the library plans
    for that routing (``chord_kernels.indexed.plan``), naming it in the result.
    Where the layer (``indexed.moe_experts``, chord-vllm) runs both GEMMs on the WGMMA kernel
    (``indexed.routing_order_rows``), each GEMM runs as it does there: one block size for both
    (``indexed.layer_block_m``), gate_up writing its rows in routing order, down
    loading such rows block by block (the gate_up's rows stand for them, put in routing order
    outside the timed call: what the layer's gate_up writes, as humming's down gets the rows its
    permuted gate_up wrote). With ``config`` (``ci/`` sweeps) the GEMM runs by slot.
    Grouped scenarios (contiguous, masked) run through the indexed API over their real rows (the
    table marks them); ``chord-grouped`` runs them through the grouped family.
    """

    name = "chord-indexed"
    role = "chord"

    def __init__(self) -> None:
        import chord_kernels

        self.version = chord_kernels.__version__
        self._packed: dict[tuple, object] = {}

    def release(self) -> None:
        self._packed.clear()

    def _pack(self, problem: GemmProblem):
        return self._pack_set(problem.weight, problem.scenario.profile)

    def _pack_set(self, weight: WeightSet, profile: str):
        import chord_kernels

        key = (*weight.key, profile)
        if key not in self._packed:
            self._packed[key] = chord_kernels.pack("indexed", weight.packed, weight.scales, profile=profile)
        return self._packed[key]

    def _layer_routing(self, problem: GemmProblem) -> tuple[int, AlignedRouting, int] | None:
        """(block_m, routing, rows in routing order) of the layer's GEMMs where they run in
        routing order (``indexed.routing_order_rows``), else None."""
        from chord_kernels import indexed

        if problem.family != "indexed" or problem.layer is None:
            return None
        w13, w2 = (self._pack_set(w, problem.scenario.profile) for w in problem.layer)
        slots = problem.num_slots
        block_m = indexed.layer_block_m(w13, w2, slots)
        r = problem.aligned(block_m)
        route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
        rows = indexed.routing_order_rows(w13, w2, route, block_m, problem.a.device, slots / w13.num_experts)
        return (block_m, r, rows) if rows else None

    def candidates(self, problem: GemmProblem) -> Iterator[Candidate]:
        yield self.candidate(problem)

    def candidate(self, problem: GemmProblem, config: object | None = None, label: str | None = None) -> Candidate:
        """The Candidate for ``problem``: the planned configuration, or ``config`` (a
        ``DecodeConfig`` or ``WgmmaConfig``; its ``block_m`` sets the routing's), as ``ci/`` sweeps use it."""
        from chord_kernels import indexed

        weight = self._pack(problem)
        device = problem.a.device
        layer = self._layer_routing(problem) if config is None else None
        if layer is not None:
            return self._in_routing_order(problem, weight, *layer, label)
        block_m = config.block_m if config is not None else indexed.choose_block_m(weight, problem.num_slots)
        indexed.prepare(weight, block_m, device)  # compile and load before any graph capture
        r = problem.aligned(block_m)
        capacity = indexed.routing_capacity(r.sorted_token_ids, r.expert_ids, block_m)
        launch = indexed.plan(weight, block_m=block_m, capacity=capacity, device=device, config=config,
                              tok_e=problem.num_slots / weight.num_experts)
        cfg = launch.config
        # A caller-owned workspace, as vLLM's experts hold one: the timed graphs replay only the launch.
        workspace = indexed.new_workspace(launch.workspace_bytes, device)
        a = problem.a_flat()
        out = torch.empty(problem.output_rows(), problem.shape.n, dtype=torch.bfloat16, device=device)
        topk_weights = None if problem.topk_weights is None else problem.topk_weights.reshape(-1).contiguous()

        def run() -> None:
            indexed.gemm(
                a, weight, r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded,
                block_m=block_m, top_k=problem.addr_top_k, topk_weights=topk_weights, out=out, config=cfg,
                workspace=workspace,
            )

        how = "" if problem.family == "indexed" else f"indexed API over the {problem.family} rows; "
        text = label or f"{how}{describe_config(cfg)}"
        return Candidate(text, run, lambda: out, detail=dataclasses.asdict(cfg) if dataclasses.is_dataclass(cfg) else None)

    def _in_routing_order(self, problem: GemmProblem, weight: object, block_m: int, r: AlignedRouting, rows: int,
                          label: str | None) -> Candidate:
        """The GEMM as ``indexed.moe_experts`` runs it: gate_up's output (``out_position``), or
        down's input (``routing_order``), in routing order."""
        from chord_kernels import indexed

        device = problem.a.device
        slots = problem.num_slots
        indexed.prepare(weight, block_m, device, block_rows=problem.is_down)
        capacity = indexed.routing_capacity(r.sorted_token_ids, r.expert_ids, block_m)
        cfg = indexed.plan(weight, block_m=block_m, capacity=capacity, device=device,
                           tok_e=slots / weight.num_experts).config
        workspace = indexed.new_workspace(indexed.max_workspace_bytes(weight, device=device), device)
        route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
        entries = r.sorted_token_ids[:rows].long()
        real = entries < slots
        if problem.is_down:
            a = problem.a_flat()[entries.clamp(max=slots - 1)]  # padding entries: any row, never stored
            out = torch.empty(slots, problem.shape.n, dtype=torch.bfloat16, device=device)
            topk_weights = None if problem.topk_weights is None else problem.topk_weights.reshape(-1).contiguous()
            cfg = cfg.with_tma_rows()  # what gemm launches for rows in routing order

            def run() -> None:
                indexed.gemm(a, weight, *route, block_m=block_m, top_k=1, topk_weights=topk_weights, out=out,
                             config=cfg, workspace=workspace, routing_order=True)

            def result() -> torch.Tensor:
                return out

            how = "rows in routing order (as moe_experts loads them)"
        else:
            out = torch.empty(rows, problem.shape.n, dtype=torch.bfloat16, device=device)
            position = torch.zeros(slots, dtype=torch.long, device=device)
            position[entries[real]] = torch.nonzero(real).squeeze(1)

            def run() -> None:
                indexed.gemm(problem.a, weight, *route, block_m=block_m, top_k=problem.addr_top_k, out=out,
                             config=cfg, workspace=workspace, out_position=True)

            def result() -> torch.Tensor:
                return out[position]

            how = "output in routing order (as moe_experts writes it)"
        return Candidate(label or f"{describe_config(cfg)}; {how}", run, result, detail=dataclasses.asdict(cfg))


class ChordGroupedImpl(ChordIndexedImpl):
    """Chord's grouped family (``chord_kernels.grouped.contiguous`` / ``.masked``) on the
    contiguous and masked scenarios, with the weight packed for that mode. Padding rows (and rows
    past ``masked_m``) are never written; the output starts zeroed, as the reference's.

    On the expert-parallel indexed scenarios the rows are routed contiguously first
    (``routing.contiguous_layout``: grouped by expert, each expert's rows padded to 128), untimed,
    as humming's ``grouped_contiguous`` path gets them permuted by vLLM; the top-k weights of a
    down GEMM are applied outside the timed call, as for humming. Both modes get the layout's mean
    rows per expert (``expected_m``), which a dispatch knows as vLLM's humming heuristic knows M."""

    name = "chord-grouped"

    def unsupported(self, problem: GemmProblem) -> str | None:
        if problem.layout is None and problem.scenario.parallel != "ep":
            return "indexed routing under tensor parallelism: see chord-indexed"
        return None

    def _mode(self, problem: GemmProblem) -> str:
        return problem.family if problem.layout is not None else "contiguous"

    def _pack(self, problem: GemmProblem):
        import chord_kernels

        mode = self._mode(problem)
        key = (*problem.weight.key, problem.scenario.profile, mode)
        if key not in self._packed:
            self._packed[key] = chord_kernels.pack(
                mode, problem.weight.packed, problem.weight.scales, profile=problem.scenario.profile
            )
        return self._packed[key]

    def _routed_contiguously(self, problem: GemmProblem, label: str | None) -> Candidate:
        from chord_kernels import grouped, indexed, routing

        weight = self._pack(problem)
        device = problem.a.device
        layout = routing.contiguous_layout(problem.topk_ids, problem.num_experts)
        expected_m = layout.expected_m
        grouped.prepare(weight, expected_m=expected_m, device=device)
        real = layout.row_slots >= 0
        slots = layout.row_slots[real]
        a = problem.a_flat()[(layout.row_slots.clamp(min=0) // problem.addr_top_k)].contiguous()
        workspace = indexed.new_workspace(indexed.max_workspace_bytes(weight, device=device), device)
        out = torch.zeros(a.shape[0], problem.shape.n, dtype=torch.bfloat16, device=device)
        scale = None if problem.topk_weights is None else problem.topk_weights.reshape(-1)[slots].reshape(-1, 1)

        def run() -> None:
            grouped.contiguous(a, weight, layout.m_indices, out=out, workspace=workspace, expected_m=expected_m)

        def result() -> torch.Tensor:
            full = torch.zeros(problem.output_rows(), problem.shape.n, dtype=torch.bfloat16, device=device)
            rows = out[real]
            full[slots] = rows if scale is None else (rows.float() * scale).to(torch.bfloat16)
            return full

        return Candidate(label or f"routed contiguously (128-row segments, untimed); grouped contiguous "
                         f"{self._contiguous_plan(weight, layout.m_indices, expected_m, device)}", run, result)

    @staticmethod
    def _contiguous_plan(weight: object, m_indices: torch.Tensor, expected_m: int, device: torch.device) -> str:
        from chord_kernels import grouped, hardware

        arch, m = hardware.arch(device.index), m_indices.numel()
        cut = grouped.contiguous_tail_config(weight, m, arch, hardware.num_sms(device.index))
        planned = f"block_m={grouped.contiguous_block_m(arch)}" if cut is None else describe_config(cut)
        wide = grouped.contiguous_config(weight, m, expected_m, arch)
        if wide is None:
            return planned
        if grouped.wide_items_pay(m_indices, weight.num_experts, wide.block_m * wide.items):
            return f"{describe_config(wide)} (the device's choice over {planned})"
        return f"{planned} (the device's choice over {describe_config(wide)})"

    def candidate(self, problem: GemmProblem, config: object | None = None, label: str | None = None) -> Candidate:
        """The Candidate for ``problem``: the mode's plan, or in the contiguous mode ``config`` (a
        ``WgmmaConfig`` whose ``block_m`` divides the 128-row segments), as ``ci/`` sweeps use it."""
        from chord_kernels import grouped, indexed

        if config is not None and (problem.layout is None or problem.family != "contiguous"):
            raise ChordInputError("chord-grouped takes a configuration in the contiguous mode only")
        if problem.layout is None:
            return self._routed_contiguously(problem, label)
        weight = self._pack(problem)
        device = problem.a.device
        layout = problem.layout
        expected_m = layout.expected_m
        grouped.prepare(weight, expected_m=expected_m, device=device)
        need = indexed.max_workspace_bytes(weight, device=device)
        if config is not None:  # (a split tail's partials are beyond the planned configurations' needs)
            blocks = problem.a.shape[0] // config.block_m
            need = max(need, indexed.plan(weight, block_m=config.block_m, capacity=blocks, device=device,
                                          config=config).workspace_bytes)
        workspace = indexed.new_workspace(need, device)
        out = torch.zeros(problem.output_rows(), problem.shape.n, dtype=torch.bfloat16, device=device)
        if problem.family == "contiguous":
            plan = (self._contiguous_plan(weight, layout.m_indices, expected_m, device) if config is None
                    else describe_config(config))

            def run() -> None:
                grouped.contiguous(problem.a, weight, layout.m_indices, out=out, workspace=workspace,
                                   expected_m=expected_m, config=config)
        else:
            plan = f"block_m={grouped.masked_block_m(weight, expected_m)}"
            out3 = out.view(weight.num_experts, -1, problem.shape.n)

            def run() -> None:
                grouped.masked(problem.a, weight, layout.masked_m, expected_m, out=out3, workspace=workspace)

        return Candidate(label or f"grouped {problem.family} {plan}", run, lambda: out)


def builtin_implementations(names: list[str] | None = None) -> list[Implementation]:
    """The built-in implementations, optionally filtered by name."""
    factories: dict[str, Callable[[], Implementation]] = {
        "reference": ReferenceImpl,
        "bf16-ceiling": Bf16CeilingImpl,
        "chord-indexed": ChordIndexedImpl,
        "chord-grouped": ChordGroupedImpl,
    }
    wanted = list(factories) if names is None else names
    unknown = [n for n in wanted if n not in factories]
    if unknown:
        raise ChordInputError(f"unknown implementation(s) {unknown}; built-in: {sorted(factories)}")
    return [factories[n]() for n in wanted]
