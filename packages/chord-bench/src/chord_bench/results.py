"""The result schema of a benchmark run (what the JSON file holds) and derived numbers.

Everything needed to reproduce and compare a run lives in :class:`RunResult`: the environment
(GPU, driver, torch, commit, command), the measured ceilings, each implementation's version (a
peer's installed package version), and per scenario and routing draw: the floor, each GEMM's
bytes/FLOPs and, per implementation, the chosen configuration and median µs of gate_up and down
plus every candidate tried (with the reason a candidate was excluded).

Schema ``chord-bench/2`` (this version) adds peer groups (Chord's ratio is taken against the best
path of a group), each candidate's full configuration (``detail``), and the scenario's
parallelism and masked buffer size. ``chord-bench/1`` files still load.
"""

from __future__ import annotations

import copy
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

SCHEMA = "chord-bench/2"
READABLE_SCHEMAS = ("chord-bench/1", SCHEMA)


@dataclass
class CandidateResult:
    config: str
    status: str
    """``ok`` (checked and timed), ``wrong`` (failed the reference check) or ``failed`` (error)."""
    us: float | None = None
    reason: str | None = None
    sm_mhz: float | None = None
    """Median SM clock while it was timed (clocks; None without NVML)."""
    detail: dict | None = None
    """The full configuration (the table shows ``config``)."""


@dataclass
class GemmResult:
    """Best correct candidate of one implementation on one GEMM."""

    us: float | None
    config: str | None
    method: str | None
    candidates: list[CandidateResult] = field(default_factory=list)
    us_sweep: float | None = None
    """The best candidate's time in the sweep, before the interleaved side-by-side timing."""
    sm_mhz: float | None = None
    """Median SM clock while ``us`` was measured."""
    detail: dict | None = None
    """The winning candidate's full configuration."""

    @property
    def excluded(self) -> list[CandidateResult]:
        return [c for c in self.candidates if c.status != "ok"]


@dataclass
class ImplResult:
    status: str
    """``ok``, ``skipped`` (does not apply / unavailable), ``wrong`` or ``failed``."""
    reason: str | None = None
    gemms: dict[str, GemmResult] = field(default_factory=dict)

    @property
    def total_us(self) -> float | None:
        """gate_up + down (timed separately, reported as their sum)."""
        if self.status != "ok" or not self.gemms:
            return None
        times = [g.us for g in self.gemms.values()]
        return None if any(t is None for t in times) else sum(times)


@dataclass
class GemmInfo:
    name: str
    n: int
    k: int
    bytes: float
    flops: int
    floor_us: float
    bound: str


@dataclass
class ScenarioResult:
    scenario: str
    family: str
    series: str
    draw: str
    seed: int
    tokens: int
    top_k: int
    num_experts: int
    tok_e: float
    experts_used: int
    max_rows_per_expert: int
    floor_us: float
    gemms: list[GemmInfo]
    impls: dict[str, ImplResult] = field(default_factory=dict)
    parallel: str = ""
    """``ep`` or ``tp`` (empty in chord-bench/1 files)."""
    expert_max_tokens: int | None = None

    @property
    def flops(self) -> int:
        return sum(g.flops for g in self.gemms)

    def tflops(self, impl: str) -> float | None:
        """Useful FLOPs (real rows only) per second of ``impl``, in TFLOP/s."""
        result = self.impls.get(impl)
        total = result.total_us if result else None
        return None if not total else self.flops / (total * 1e-6) / 1e12

    def best(self, names: list[str]) -> tuple[str, float] | None:
        """The fastest of ``names`` that has a total here, with its µs."""
        timed = [(n, self.impls[n].total_us) for n in names if n in self.impls and self.impls[n].total_us]
        return min(timed, key=lambda t: t[1]) if timed else None

    def pct_of_floor(self, impl: str) -> float | None:
        """Floor / measured time, in percent (100% = at the floor)."""
        result = self.impls.get(impl)
        total = result.total_us if result else None
        return None if not total else 100.0 * self.floor_us / total

    def ratio(self, peer: str, impl: str) -> float | None:
        """peer µs / impl µs (> 1: ``impl`` is faster than ``peer``)."""
        p, i = self.impls.get(peer), self.impls.get(impl)
        tp, ti = (p.total_us if p else None), (i.total_us if i else None)
        return None if not tp or not ti else tp / ti


@dataclass
class ImplInfo:
    name: str
    role: str
    version: str
    available: bool
    reason: str | None = None
    extra: dict[str, str] = field(default_factory=dict)
    group: str = ""


@dataclass
class RunResult:
    created_utc: str
    command: str
    environment: dict[str, Any]
    ceilings: dict[str, Any]
    options: dict[str, Any]
    implementations: list[ImplInfo] = field(default_factory=list)
    scenarios: list[ScenarioResult] = field(default_factory=list)
    clocks: dict[str, Any] = field(default_factory=dict)
    """SM clock range, power, temperature and clock-event reasons over the run (chord_bench.clocks)."""
    schema: str = SCHEMA

    def impl_names(self) -> list[str]:
        """Declared implementations first, then any other name that has results."""
        names = [i.name for i in self.implementations]
        for s in self.scenarios:
            names += [n for n in s.impls if n not in names]
        return names

    def peers(self) -> list[str]:
        return [i.name for i in self.implementations if i.role == "peer"]

    def chords(self) -> list[str]:
        return [i.name for i in self.implementations if i.role == "chord"]

    def peer_groups(self) -> dict[str, list[str]]:
        """Peer names by group (a peer without a group is its own group), in declaration order."""
        groups: dict[str, list[str]] = {}
        for i in self.implementations:
            if i.role == "peer":
                groups.setdefault(i.group or i.name, []).append(i.name)
        return groups

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def write_json(self, path: Path) -> Path:
        """Write whole or not at all (a temporary file renamed over ``path``)."""
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n")
        tmp.replace(path)
        return path

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunResult:
        if data.get("schema") not in READABLE_SCHEMAS:
            raise ValueError(f"unsupported result schema {data.get('schema')!r}; expected one of {READABLE_SCHEMAS}")
        scenarios = []
        for s in data["scenarios"]:
            impls = {}
            for name, r in s["impls"].items():
                gemms = {
                    g: GemmResult(v["us"], v["config"], v["method"], [CandidateResult(**c) for c in v["candidates"]],
                                  v.get("us_sweep"), v.get("sm_mhz"), v.get("detail"))
                    for g, v in r["gemms"].items()
                }
                impls[name] = ImplResult(r["status"], r["reason"], gemms)
            fields = {k: v for k, v in s.items() if k not in ("impls", "gemms")}
            scenarios.append(ScenarioResult(**fields, gemms=[GemmInfo(**g) for g in s["gemms"]], impls=impls))
        return cls(
            created_utc=data["created_utc"], command=data["command"], environment=data["environment"],
            ceilings=data["ceilings"], options=data["options"],
            implementations=[ImplInfo(**i) for i in data["implementations"]], scenarios=scenarios,
            clocks=data.get("clocks", {}), schema=data["schema"],
        )

    def with_ceilings(self, copy_tbps: float, bf16_tflops: float, source: str) -> RunResult:
        """A copy whose floors are recomputed from the stored bytes/FLOPs against other ceilings."""
        run = RunResult.from_dict(copy.deepcopy(self.to_dict()))
        # A run re-rendered before keeps the ceilings it was measured against, not the last ones.
        measured = self.ceilings.get("measured") or {k: self.ceilings[k] for k in ("copy_tbps", "bf16_tflops", "source")}
        run.ceilings = {**run.ceilings, "copy_tbps": copy_tbps, "bf16_tflops": bf16_tflops, "source": source,
                        "measured": copy.deepcopy(measured)}
        for s in run.scenarios:
            for g in s.gemms:
                memory, compute = g.bytes / (copy_tbps * 1e12) * 1e6, g.flops / (bf16_tflops * 1e12) * 1e6
                g.floor_us = round(max(memory, compute), 2)
                g.bound = "memory" if memory >= compute else "compute"
            s.floor_us = round(sum(g.floor_us for g in s.gemms), 2)
        return run

    @classmethod
    def read_json(cls, path: Path) -> RunResult:
        return cls.from_dict(json.loads(Path(path).read_text()))
