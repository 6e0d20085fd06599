"""Adapter for public Humming (github.com/inclusionAI/humming), driven from a user's checkout.

Nothing of Humming is copied here: the adapter imports the checkout given with
``--peer humming=/path`` and calls its public Python API (``HummingKernel``,
``prepare_humming_weight``, ``prepare_humming_weight_scale``). Humming JIT-compiles each kernel
configuration with nvcc and launches through a small torch C++ extension it builds on first use
(``torch.utils.cpp_extension``: needs g++, ninja and the Python headers), and reads cubins with
``pyelftools``.

Sweep (BENCHMARKS.md): 10 configurations per GEMM — its mma.sync and wgmma paths, block_m 16/32/64,
block_k 64/128, 4 stages, cp.async, no TMA / warp specialisation (its warp-specialised TMA MoE
path does not work at 2d9d953), no stream-K (the MoE path its own tests exercise). Each
configuration is compiled, checked against the Chord reference, and only correct ones are timed;
the harness reports the fastest and lists the excluded ones with their reason.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from chord_bench.impls import Candidate, Implementation
from chord_bench.problems import GemmProblem
from chord_kernels.formats import unpack_int4


@dataclass(frozen=True)
class HummingConfig:
    """One Humming kernel configuration (its ``block_shape`` / ``warp_shape`` are (M, N, K))."""

    mma_type: str
    block: tuple[int, int, int]
    warp: tuple[int, int, int]
    num_stages: int = 4

    @property
    def label(self) -> str:
        b, w = self.block, self.warp
        return f"{self.mma_type} block={b[0]}x{b[1]}x{b[2]} warp={w[0]}x{w[1]}x{w[2]} stages={self.num_stages}"

    def fits(self, n: int, k: int) -> bool:
        return n % self.block[1] == 0 and k % self.block[2] == 0


SWEEP: tuple[HummingConfig, ...] = (
    # mma.sync path: warps tile N by 64 and K by 32 (bf16 activations need warp N = 64).
    HummingConfig("mma", (16, 128, 128), (16, 64, 32)),
    HummingConfig("mma", (16, 256, 64), (16, 64, 32)),
    HummingConfig("mma", (32, 128, 128), (32, 64, 32)),
    HummingConfig("mma", (32, 256, 64), (32, 64, 32)),
    HummingConfig("mma", (64, 128, 128), (64, 64, 32)),
    HummingConfig("mma", (64, 256, 64), (64, 64, 32)),
    # wgmma path: the token tile is the wgmma N (= warp M), 4 warps across block N.
    HummingConfig("wgmma", (16, 256, 64), (16, 64, 64)),
    HummingConfig("wgmma", (32, 256, 64), (32, 64, 64)),
    HummingConfig("wgmma", (64, 256, 64), (64, 64, 64)),
    HummingConfig("wgmma", (64, 256, 128), (64, 64, 64)),
)


def _git_commit(path: Path) -> str | None:
    """HEAD commit of a git checkout, read from ``.git`` directly (no git binary needed)."""
    git = path / ".git"
    try:
        if git.is_file():  # worktree: "gitdir: ..."
            git = Path(git.read_text().split(":", 1)[1].strip())
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref:"):
            return head
        ref = head.split(" ", 1)[1]
        if (git / ref).exists():
            return (git / ref).read_text().strip()
        packed = git / "packed-refs"
        if packed.exists():
            for line in packed.read_text().splitlines():
                if line.endswith(" " + ref):
                    return line.split(" ", 1)[0]
    except OSError:
        return None
    return None


def _tree_hash(path: Path) -> str:
    """Content hash of the Python and CUDA sources (identifies a checkout without git)."""
    h = hashlib.sha256()
    for f in sorted(path.joinpath("humming").rglob("*")):
        if f.is_file() and f.suffix in {".py", ".cuh", ".cpp", ".h"}:
            h.update(f.relative_to(path).as_posix().encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:12]


class HummingPeer(Implementation):
    """Public Humming's indexed MoE GEMM, best correct configuration of :data:`SWEEP`."""

    role = "peer"

    def __init__(self, path: str | Path, name: str = "humming", sweep: tuple[HummingConfig, ...] = SWEEP) -> None:
        self.name = name
        self.path = Path(path).expanduser().resolve()
        self.sweep = sweep
        self._api: dict[str, object] | None = None
        self._error: str | None = None
        self._weights: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}
        self.version = self._version()

    def _version(self) -> str:
        if not (self.path / "humming" / "__init__.py").exists():
            self._error = f"{self.path} is not a Humming checkout (no humming/__init__.py)"
            return "unknown"
        commit = _git_commit(self.path)
        label = f"git {commit[:12]}" if commit else "no git metadata"
        return f"{label}, sources {_tree_hash(self.path)}"

    def describe(self) -> dict[str, str]:
        return {**super().describe(), "path": str(self.path)}

    def _load(self) -> dict[str, object]:
        if self._api is not None:
            return self._api
        if str(self.path) not in sys.path:
            sys.path.insert(0, str(self.path))
        try:
            from humming import dtypes
            from humming.kernel.humming import HummingKernel, init_humming_launcher
            from humming.utils.weight import prepare_humming_weight, prepare_humming_weight_scale
        except Exception as exc:
            hint = " (pip install pyelftools)" if "elftools" in str(exc) else ""
            self._error = f"cannot import Humming from {self.path}: {type(exc).__name__}: {exc}{hint}"
            raise RuntimeError(self._error) from exc
        try:
            # Build Humming's launcher extension once, up front: if the toolchain lacks something
            # (g++, ninja, Python headers) every configuration would fail the same slow way.
            init_humming_launcher()
        except Exception as exc:
            tail = " | ".join(str(exc).strip().splitlines()[-3:])
            self._error = (f"Humming's launcher extension (torch.utils.cpp_extension; needs g++, ninja "
                           f"and Python headers) failed to build: {type(exc).__name__}: {tail}")
            raise RuntimeError(self._error) from exc
        self._api = {
            "dtypes": dtypes, "HummingKernel": HummingKernel,
            "prepare_weight": prepare_humming_weight, "prepare_scale": prepare_humming_weight_scale,
        }
        return self._api

    def unavailable(self) -> str | None:
        if self._error:
            return self._error
        if not torch.cuda.is_available():
            return "Humming needs a CUDA GPU"
        try:
            self._load()
        except RuntimeError:
            return self._error
        return None

    def unsupported(self, problem: GemmProblem) -> str | None:
        if problem.family != "indexed":
            return ("Humming has only the indexed (vLLM-routing) MoE path at this commit; compare "
                    "grouped scenarios with the indexed ones at matched rows")
        return None

    def release(self) -> None:
        self._weights.clear()

    def _weights_for(self, problem: GemmProblem) -> tuple[torch.Tensor, torch.Tensor]:
        api = self._load()
        key = problem.weight.key
        if key not in self._weights:
            dtypes = api["dtypes"]
            codes = unpack_int4(problem.weight.packed).to(torch.int32)  # [E, N, K], values 0..15
            weight = api["prepare_weight"](codes, dtypes.uint4, dtypes.bfloat16)
            del codes
            # Group-wise bf16 scales apply before the MMA (to_apply_on_c=False) on both paths.
            scale = api["prepare_scale"](problem.weight.scales.contiguous(), to_apply_on_c=False)
            self._weights[key] = (weight, scale)
        return self._weights[key]

    def candidates(self, problem: GemmProblem) -> Iterator[Candidate]:
        api = self._load()
        dtypes = api["dtypes"]
        weight, scale = self._weights_for(problem)
        n, k = problem.shape.n, problem.shape.k
        top_k = problem.routing_top_k
        rows = problem.topk_ids.shape[0]
        device = problem.a.device
        inputs = problem.a.view(rows, top_k, k) if problem.is_down else problem.a
        topk_weights = problem.topk_weights.contiguous() if problem.is_down else None
        locks = torch.zeros(1024, dtype=torch.int32, device=device)
        for cfg in self.sweep:
            if not cfg.fits(n, k):
                continue
            try:
                kernel = api["HummingKernel"](
                    problem_shape=(0, n, k), block_shape=cfg.block, warp_shape=cfg.warp,
                    a_dtype=dtypes.bfloat16, b_dtype=dtypes.uint4, c_dtype=dtypes.bfloat16,
                    bs_dtype=dtypes.bfloat16, weight_scale_group_size=32, num_stages=cfg.num_stages,
                    use_warp_spec=False, use_tma=False, use_mbarrier=False, use_cp_async=True,
                    mma_type=cfg.mma_type, use_stream_k=False, is_moe=True, top_k=top_k,
                    is_moe_down=problem.is_down,
                )
            except Exception as exc:
                yield Candidate(cfg.label, _failed, _failed, error=f"build failed: {type(exc).__name__}: {exc}")
                continue
            r = problem.aligned(cfg.block[0])
            out = torch.empty(rows, top_k, n, dtype=torch.bfloat16, device=device)

            def run(kernel=kernel, r=r, out=out) -> None:
                kernel(
                    inputs=inputs, weight=weight, outputs=out, weight_scale=scale,
                    topk_weights=topk_weights, sorted_token_ids=r.sorted_token_ids,
                    expert_ids=r.expert_ids, num_tokens_post_padded=r.num_tokens_post_padded,
                    locks=locks,
                )

            yield Candidate(cfg.label, run, lambda out=out: out.view(rows * top_k, n))


def _failed() -> None:
    raise RuntimeError("this candidate failed to build")
