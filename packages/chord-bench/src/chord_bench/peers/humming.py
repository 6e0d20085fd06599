"""humming-kernels (``import humming``), the W4A16 MoE GEMMs vLLM 0.33 runs on H200 without Chord.

Nothing of humming is copied here: the user installs it (``pip install humming-kernels==0.1.19``
or ``chord-bench[humming]``), and the installed version is recorded in every result. The adapter
calls it the way vLLM 0.33's ``fused_moe/experts/fused_humming_moe.py`` does:

- **Weights.** compressed-tensors int4 (symmetric, group 32, code = value + 8) is humming's
  ``uint4`` with bf16 group scales. vLLM's conversion step ``convert_symmetric_integer_weight``
  runs first (weights that never use code 0 switch to a sign-magnitude format), then humming's
  ``prepare_and_transform_humming_tensors`` with vLLM's padding (N to 256, K to 128). For Kimi's
  shapes that is ``LayerConfig(b_dtype="uint4", a_dtype="bfloat16", c_dtype="bfloat16",
  bs_dtype="bfloat16", weight_scale_group_size=32, num_experts=E, shape_n=N, shape_k=K)`` and
  ``transform_humming_tensors``, as ``humming.testing.runner.KernelTestRunner`` builds weights.
- **Configuration.** ``humming.tune.get_heuristics_config(layer_config, gemm_type=...)`` with
  no shape gives each GEMM a list of ``(lo, hi, config)`` ranges; the kernel is the one whose range
  holds ``valid_shape_m = rows * top_k`` (``lo < m <= hi``).
- **indexed** (vLLM's ``HummingIndexedExperts``, TP): ``moe_align_block_size`` at the block size
  of gate_up's range (64 when no range holds ``m``); down's block size is chosen from its own
  ranges and the routing re-aligned when it differs. Down is unweighted (vLLM applies the top-k
  weights in ``moe_fused_mul_sum`` afterwards), so the check applies them outside the timed call.
- **grouped_contiguous** (``HummingGroupedExperts``, EP): rows permuted by expert without padding,
  ``expert_layout`` = int64 offsets ``[E + 1]``.
- **grouped_masked** (``BatchedHummingGroupedExperts``, DeepEP low latency): the
  ``[E, expert_max_tokens, K]`` buffer, ``expert_layout`` = int32 rows per expert.
- compute config ``{"use_batch_invariant": false, "use_f16_accum": false, "gemm_type": ...}``;
  locks: SMs x 8 int32 zeros (vLLM's ``create_humming_locks``); ``humming.ops.humming_gemm``.

The call passes only the range that holds ``m`` as its tuning config: from the full list humming
launches the same kernel, but it compiles every kernel of a list on first use.
:meth:`HummingKernels.warm_up` compiles what the selected scenarios will launch, in parallel,
before anything is timed.

``--peer-sweep`` adds a second set of paths ("humming-...-sweep") that also time the configurations
of the neighbouring ranges and keep the fastest correct one; they are reported apart from the
vLLM-default paths.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from chord_bench.impls import Candidate, Implementation
from chord_bench.problems import GemmProblem, WeightSet
from chord_bench.scenarios import Scenario

PACKAGE = "humming-kernels"
PEER_OF_RECORD = "0.1.19"
"""The version vLLM 0.33 pins."""
NOT_INSTALLED = f"{PACKAGE} is not installed (pip install {PACKAGE}=={PEER_OF_RECORD})"
GEMM_TYPES = ("indexed", "grouped_contiguous", "grouped_masked")
SHORT_NAMES = {"indexed": "indexed", "grouped_contiguous": "contiguous", "grouped_masked": "masked"}
DEFAULT_BLOCK_SIZE = 64
"""vLLM's routing block size when no range holds ``valid_shape_m``."""
SWEEP_NEIGHBOURS = 2
"""``--peer-sweep``: ranges on each side of the selected one whose configurations are also timed."""
COMPUTE_CONFIG = {"use_batch_invariant": False, "use_f16_accum": False}
"""vLLM's compute config without ``VLLM_BATCH_INVARIANT`` / ``VLLM_HUMMING_USE_F16_ACCUM``."""

Range = tuple[int, int, dict]


# --------------------------------------------------------------------------- vLLM's choices (CPU)


def applicable_gemm_types(scenario: Scenario) -> tuple[str, ...]:
    """The humming paths vLLM 0.33 would run for ``scenario``: ``indexed`` everywhere (TP, and the
    ``VLLM_HUMMING_MOE_GEMM_TYPE=indexed`` choice under EP), ``grouped_contiguous`` under EP
    (vLLM's default there) and on contiguous scenarios, ``grouped_masked`` on masked ones
    (DeepEP low latency)."""
    if scenario.family == "masked":
        return ("indexed", "grouped_masked")
    if scenario.family == "contiguous" or scenario.parallel == "ep":
        return ("indexed", "grouped_contiguous")
    return ("indexed",)


def valid_shape_m(scenario: Scenario) -> int:
    """``rows * top_k``: the routed rows of this GPU's experts, as vLLM estimates them."""
    return scenario.num_slots


def range_for(ranges: Sequence[Sequence[Any]], shape_m: int) -> Range | None:
    """The first ``(lo, hi, config)`` with ``lo < shape_m <= hi`` (vLLM's and humming's rule)."""
    for lo, hi, config in ranges:
        if lo < shape_m <= hi:
            return int(lo), int(hi), config
    return None


def block_size(ranges: Sequence[Sequence[Any]], shape_m: int) -> int:
    """Routing block size vLLM takes from ``ranges``: the chosen config's ``block_shape[0]``."""
    chosen = range_for(ranges, shape_m)
    return DEFAULT_BLOCK_SIZE if chosen is None else int(chosen[2]["block_shape"][0])


def indexed_block_sizes(gate_up: Sequence[Sequence[Any]], down: Sequence[Sequence[Any]],
                        shape_m: int) -> tuple[int, int, bool]:
    """``(gate_up block, down block, realigned)``: vLLM aligns once for gate_up and re-aligns
    for down only when down's own ranges ask for another block size."""
    first, second = block_size(gate_up, shape_m), block_size(down, shape_m)
    return first, second, second != first


def sweep_ranges(ranges: Sequence[Sequence[Any]], shape_m: int,
                 neighbours: int = SWEEP_NEIGHBOURS) -> list[Range]:
    """The selected range and up to ``neighbours`` on each side, one per distinct config."""
    ranges = [(int(lo), int(hi), cfg) for lo, hi, cfg in ranges]
    chosen = range_for(ranges, shape_m)
    if chosen is None:
        return []
    at = ranges.index(chosen)
    picked: list[Range] = []
    seen: set[str] = set()
    for r in [chosen, *ranges[max(0, at - neighbours):at], *ranges[at + 1:at + 1 + neighbours]]:
        key = json.dumps(r[2], sort_keys=True)
        if key not in seen:
            seen.add(key)
            picked.append(r)
    return picked


def describe(config: dict, lo: int | None = None, hi: int | None = None) -> str:
    """One line for the table: MMA, block/warp shape, stages, CTAs per SM, switches that are on."""
    block = "x".join(str(v) for v in config.get("block_shape", ()))
    warp = "x".join(str(v) for v in config.get("warp_shape", ()))
    flags = [k.removeprefix("use_") for k, v in sorted(config.items()) if k.startswith("use_") and v is True]
    text = (f"{config.get('mma_type', '?')} block={block} warp={warp} stages={config.get('num_stages', '?')} "
            f"ctas/SM={config.get('num_ctas_per_sm', '?')}")
    text += "".join(f" {f}" for f in flags)
    if lo is not None:
        text += f" [m in ({lo}, {hi}]]"
    return text


def cache_dir() -> Path:
    """Where chord-bench keeps what is slow to recompute (``$CHORD_BENCH_CACHE``)."""
    return Path(os.environ.get("CHORD_BENCH_CACHE", Path.home() / ".cache" / "chord-bench"))


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def installed_version() -> str | None:
    """The installed humming-kernels version (None when it is not installed)."""
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        try:
            import humming
        except Exception:  # not installed at all, or broken: unavailable() says which
            return None
        return getattr(humming, "__version__", None)


# --------------------------------------------------------------------------- humming itself (GPU)


@dataclass
class HummingWeight:
    """One projection in humming's layout and its layer config."""

    layer_config: Any
    layer_str: str
    tensors: dict[str, torch.Tensor]
    schema: Any
    """The weight schema after vLLM's conversion (``uint4`` for weights that use code 0)."""


class HummingKernels:
    """The installed humming, loaded once and shared by the three path adapters: its API, weights
    transformed once per weight set, configuration ranges once per (layer, gemm type)."""

    def __init__(self) -> None:
        self.version = installed_version()
        self.error: str | None = None
        self.api: dict[str, Any] | None = None
        self._weights: dict[tuple, HummingWeight] = {}
        self._ranges: dict[tuple[str, str], list] = {}
        self._ranges_lock = threading.Lock()
        self._locks: dict[torch.device, torch.Tensor] = {}
        self.paths: list[HummingPath] = []
        self._warm = False

    def load(self) -> dict[str, Any]:
        if self.api is not None:
            return self.api
        if self.version is None:
            self.error = NOT_INSTALLED
            raise RuntimeError(self.error)
        try:
            import humming
            from humming.kernel.humming import HummingKernel
            from humming.ops import humming_gemm
            from humming.schema import HummingWeightSchema
            from humming.transform import (
                prepare_and_transform_humming_tensors,
                prepare_layer_config,
            )
            from humming.tune import get_heuristics_config
        except Exception as exc:
            self.error = f"cannot import humming {self.version}: {type(exc).__name__}: {exc}"
            raise RuntimeError(self.error) from exc
        self.api = {
            "module": humming, "HummingKernel": HummingKernel, "humming_gemm": humming_gemm,
            "HummingWeightSchema": HummingWeightSchema, "prepare_layer_config": prepare_layer_config,
            "prepare_and_transform": prepare_and_transform_humming_tensors,
            "get_heuristics_config": get_heuristics_config,
        }
        return self.api

    def unavailable(self) -> str | None:
        if self.version is None:
            self.error = NOT_INSTALLED
        if self.error:
            return self.error
        if not torch.cuda.is_available():
            return "humming needs a CUDA GPU"
        try:
            self.load()
        except RuntimeError:
            return self.error
        return None

    def _layer_args(self, num_experts: int, n: int, k: int, schema: Any) -> dict[str, Any]:
        """vLLM's ``_prepare_and_transform_sublayer`` arguments (bf16 activations, no bias)."""
        return {"shape_n": n, "shape_k": k, "weight_schema": schema, "num_experts": num_experts,
                "pad_n_to_multiple": 256, "pad_k_to_multiple": 128, "torch_dtype": torch.bfloat16,
                "device": torch.cuda.current_device()}

    def schema(self) -> Any:
        """Kimi's format as vLLM converts compressed-tensors pack-quantized int4, group 32."""
        return self.load()["HummingWeightSchema"](b_dtype="uint4", bs_dtype="bfloat16", weight_scale_group_size=32)

    def layer_config(self, num_experts: int, n: int, k: int, schema: Any = None) -> Any:
        """The layer config of a projection, from its shape (no weights needed)."""
        args = self._layer_args(num_experts, n, k, schema if schema is not None else self.schema())
        return self.load()["prepare_layer_config"](**args)

    def ranges(self, layer_config: Any, gemm_type: str) -> list:
        """vLLM's tuning config: ``get_heuristics_config(layer_config, gemm_type=...)``, no shape.

        It takes seconds per (layer, gemm type), so the result is also kept on disk under
        ``$CHORD_BENCH_CACHE`` (default ``~/.cache/chord-bench``), keyed by everything it depends
        on: humming's version, the layer config, the gemm type, the compute config and the GPU."""
        key = (layer_config.to_str(), gemm_type)
        with self._ranges_lock:
            if key not in self._ranges:
                props = torch.cuda.get_device_properties(torch.cuda.current_device())
                ident = json.dumps([self.version, *key, COMPUTE_CONFIG, props.name, props.multi_processor_count])
                path = cache_dir() / "humming-ranges" / f"{hashlib.sha256(ident.encode()).hexdigest()[:24]}.json"
                if path.exists():
                    self._ranges[key] = json.loads(path.read_text())["ranges"]
                else:
                    ranges = self.load()["get_heuristics_config"](
                        layer_config, use_f16_accum=False, use_batch_invariant=False, gemm_type=gemm_type)
                    self._ranges[key] = json.loads(json.dumps(ranges))  # as the JSON vLLM passes
                    _write_atomic(path, json.dumps({"key": json.loads(ident), "ranges": self._ranges[key]}))
            return self._ranges[key]

    def weight(self, weight: WeightSet) -> HummingWeight:
        """``weight`` through vLLM's conversion and humming's transform (cached per weight set)."""
        if weight.key not in self._weights:
            schema, tensors = self.schema().convert_symmetric_integer_weight(
                {"weight": weight.packed, "weight_scale": weight.scales})
            args = self._layer_args(weight.num_experts, weight.n, weight.k, schema)
            config, tensors = self.load()["prepare_and_transform"](tensors, **args)
            self._weights[weight.key] = HummingWeight(config, config.to_str(), tensors, schema)
        return self._weights[weight.key]

    def locks(self, device: torch.device) -> torch.Tensor:
        if device not in self._locks:
            sms = torch.cuda.get_device_properties(device).multi_processor_count
            self._locks[device] = torch.zeros(sms * 8, dtype=torch.int32, device=device)
        return self._locks[device]

    def warm_up(self, scenarios: Sequence[Scenario], device: torch.device, log: Callable[[str], None]) -> None:
        """Once for all paths: compute their ranges and compile every kernel they will launch, a
        thread per (layer, gemm type) so the compiler subprocesses run side by side; each group
        starts compiling as soon as its ranges are known."""
        if self._warm:
            return
        self._warm = True
        futures: dict[Future, str] = {}
        count = 0
        with ThreadPoolExecutor(max_workers=8) as pool:
            for path in self.paths:
                for layer, configs in path.kernels_needed(scenarios).items():
                    count += len(configs)
                    ranges = [[0, 1 << 30, c] for c in configs.values()]
                    futures[pool.submit(self.compile, layer, path.gemm_type, ranges, device)] = path.name
            log(f"humming: compiling {count} kernels in {len(futures)} groups")
            for future, name in futures.items():
                try:
                    future.result()
                except Exception as exc:  # compiled again, and failing with its reason, when timed
                    log(f"{name}: ahead-of-time compile failed: {type(exc).__name__}: {exc}")

    def compile(self, layer_str: str, gemm_type: str, ranges: list, device: torch.device) -> None:
        """Compile (and cache, by configuration) the kernels of ``ranges`` as ``humming_gemm``
        would on first use; a later call naming one of them finds it compiled."""
        compute = json.dumps({**COMPUTE_CONFIG, "gemm_type": gemm_type})
        self.load()["HummingKernel"].prepare_kernels(layer_str, compute, json.dumps(ranges), device.index)

    def release(self) -> None:
        self._weights.clear()


class HummingPath(Implementation):
    """One humming MoE path (``indexed``, ``grouped_contiguous`` or ``grouped_masked``) where
    vLLM 0.33 would use it; ``sweep=True`` also times the neighbouring ranges' configurations."""

    role = "peer"

    def __init__(self, lib: HummingKernels, gemm_type: str, *, sweep: bool = False) -> None:
        if gemm_type not in GEMM_TYPES:
            raise ValueError(f"gemm_type: expected one of {GEMM_TYPES}, got {gemm_type!r}")
        self.lib, self.gemm_type, self.sweep = lib, gemm_type, sweep
        lib.paths.append(self)
        self.name = f"humming-{SHORT_NAMES[gemm_type]}" + ("-sweep" if sweep else "")
        self.group = "humming sweep" if sweep else "humming"
        self.version = f"{PACKAGE} {lib.version}" if lib.version else f"{PACKAGE} (not installed)"

    def describe(self) -> dict[str, str]:
        api = self.lib.api
        where = getattr(api["module"], "__file__", "") if api else ""
        mode = "best of the neighbouring ranges" if self.sweep else "vLLM 0.33 default (heuristic range)"
        return {**super().describe(), "gemm_type": self.gemm_type, "mode": mode, "path": str(where)}

    def unavailable(self) -> str | None:
        return self.lib.unavailable()

    def unsupported(self, problem: GemmProblem) -> str | None:
        if self.gemm_type not in applicable_gemm_types(problem.scenario):
            return f"vLLM does not run humming {self.gemm_type} on {problem.scenario.family} {problem.scenario.parallel.upper()}"
        return None

    def release(self) -> None:
        self.lib.release()

    def warm_up(self, scenarios: Sequence[Scenario], device: torch.device, log: Callable[[str], None]) -> None:
        """Compile every kernel the scenarios will launch, for all paths of this humming at once."""
        if self.unavailable() is None:
            self.lib.warm_up(scenarios, device, log)

    def kernels_needed(self, scenarios: Sequence[Scenario]) -> dict[str, dict[str, dict]]:
        """``{layer config: {config key: config}}`` of the kernels this path will launch."""
        work: dict[str, dict[str, dict]] = {}
        for s in scenarios:
            if self.gemm_type not in applicable_gemm_types(s):
                continue
            m = valid_shape_m(s)
            for g in s.gemms:
                config = self.lib.layer_config(s.num_experts, g.n, g.k)
                ranges = self.lib.ranges(config, self.gemm_type)
                picked = sweep_ranges(ranges, m) if self.sweep else [r for r in [range_for(ranges, m)] if r]
                work.setdefault(config.to_str(), {}).update({json.dumps(c, sort_keys=True): c for _, _, c in picked})
        return work

    def candidates(self, problem: GemmProblem) -> Iterator[Candidate]:
        hw = self.lib.weight(problem.weight)
        ranges = self.lib.ranges(hw.layer_config, self.gemm_type)
        m = valid_shape_m(problem.scenario)
        if self.sweep:
            chosen = [(0, 1 << 30, cfg, describe(cfg, lo, hi)) for lo, hi, cfg in sweep_ranges(ranges, m)]
        else:
            picked = range_for(ranges, m)
            if picked is None:
                yield Candidate(f"no range holds valid_shape_m={m}", _never, _never,
                                error=f"none of humming's {len(ranges)} heuristic ranges holds valid_shape_m={m}")
                return
            lo, hi, cfg = picked
            chosen = [(lo, hi, cfg, describe(cfg, lo, hi) + self._realign_note(problem, m))]
        for lo, hi, cfg, label in chosen:
            # The configuration is vLLM's choice (made above from valid_shape_m); handed to
            # humming as the only one, over every m, so its launcher never re-selects a range
            # (on the H200 its range check refused the chosen range's own m, 2026-11-30).
            del lo, hi
            yield self._candidate(problem, hw, [[0, 1 << 30, cfg]], label, cfg)

    def _realign_note(self, problem: GemmProblem, m: int) -> str:
        """Down of the indexed path: say whether vLLM re-aligns the routing for it."""
        if self.gemm_type != "indexed" or not problem.is_down:
            return ""
        hw = self.lib.weight(problem.weight)
        up = problem.scenario.gate_up
        up_config = self.lib.layer_config(problem.num_experts, up.n, up.k, hw.schema)
        first, second, realigned = indexed_block_sizes(
            self.lib.ranges(up_config, "indexed"), self.lib.ranges(hw.layer_config, "indexed"), m)
        return f"; routing re-aligned {first}->{second}" if realigned else f"; gate_up's routing (block {first})"

    def _candidate(self, problem: GemmProblem, hw: HummingWeight, tuning: list, label: str, cfg: dict) -> Candidate:
        api = self.lib.load()
        device = problem.a.device
        n = problem.shape.n
        compute = json.dumps({**COMPUTE_CONFIG, "gemm_type": self.gemm_type})
        common = {
            "layer_config": hw.layer_str, "compute_config": compute, "tuning_config": json.dumps(tuning),
            "weight": hw.tensors["weight"], "weight_scale": hw.tensors["weight_scale"],
            "locks": self.lib.locks(device), "valid_shape_m": valid_shape_m(problem.scenario),
        }
        gemm = api["humming_gemm"]
        scale = problem.topk_weights.reshape(-1, 1) if problem.topk_weights is not None else None
        if self.gemm_type == "indexed":
            r = problem.aligned(int(cfg["block_shape"][0]))
            a = problem.a_flat()
            out = torch.empty(problem.output_rows(), n, dtype=torch.bfloat16, device=device)

            def run() -> None:
                gemm(inputs=a, outputs=out, sorted_ids=r.sorted_token_ids, expert_ids=r.expert_ids,
                     num_tokens_padded=r.num_tokens_post_padded, top_k=problem.addr_top_k, **common)

            def result() -> torch.Tensor:
                return out if scale is None else (out.float() * scale).to(torch.bfloat16)
        elif self.gemm_type == "grouped_contiguous":
            rows = problem.sorted_rows()
            a = problem.a_flat()[rows.a_rows].contiguous()
            counts = torch.tensor(rows.counts, dtype=torch.int64)
            offsets = torch.nn.functional.pad(counts.cumsum(0), (1, 0)).to(device)
            out = torch.empty(a.shape[0], n, dtype=torch.bfloat16, device=device)
            row_scale = None if rows.row_scale is None else rows.row_scale.reshape(-1, 1)

            def run() -> None:
                gemm(inputs=a, outputs=out, expert_layout=offsets, top_k=1, **common)

            def result() -> torch.Tensor:
                full = torch.zeros(problem.output_rows(), n, dtype=torch.bfloat16, device=device)
                full[rows.out_rows] = out if row_scale is None else (out.float() * row_scale).to(torch.bfloat16)
                return full
        else:
            a = problem.a_flat()
            masked_m = problem.layout.masked_m.to(device=device, dtype=torch.int32)
            out = torch.empty(problem.output_rows(), n, dtype=torch.bfloat16, device=device)

            def run() -> None:
                gemm(inputs=a, outputs=out, expert_layout=masked_m, top_k=1, **common)

            def result() -> torch.Tensor:
                return out
        detail = {"gemm_type": self.gemm_type, "range": tuning[0][:2], "config": cfg, "layer_config": hw.layer_str}
        return Candidate(label, run, result, detail=detail)


def _never() -> None:
    raise RuntimeError("this candidate could not be built")


def humming_paths(*, sweep: bool = False) -> list[Implementation]:
    """The three humming paths (vLLM's default configuration), plus their sweeps with ``sweep``."""
    lib = HummingKernels()
    paths: list[Implementation] = [HummingPath(lib, t) for t in GEMM_TYPES]
    if sweep:
        paths += [HummingPath(lib, t, sweep=True) for t in GEMM_TYPES]
    return paths
