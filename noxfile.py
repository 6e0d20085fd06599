"""Build, test, lint, demo and GPU sessions for the Chord monorepo. `nox -l` lists them."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import nox
from nox.command import CommandFailed

ROOT = Path(__file__).parent
PACKAGES = ("chord-kernels", "chord-pack", "chord-vllm", "chord-tokenweave")
# CI and laptops test on the CPU wheel; on a CUDA host set CHORD_TORCH to the torch you serve with.
TORCH = os.environ.get("CHORD_TORCH", "torch==2.13.0")

NVCC_WHEELS = ("nvidia-cuda-nvcc~=13.0.0", "nvidia-cuda-runtime~=13.0.0", "nvidia-cuda-cccl~=13.0.0")
"""nvcc, the CUDA runtime headers and CCCL (cuda_fp16.h includes <nv/target>) from PyPI."""

nox.options.sessions = ["tests", "lint"]
nox.options.reuse_existing_virtualenvs = True


def _src_path() -> str:
    return os.pathsep.join(str(ROOT / "packages" / p / "src") for p in PACKAGES)


def _install_all(session: nox.Session, extras: str = "test", nvcc: bool = True) -> None:
    session.install(TORCH)
    session.install(*[f"-e{ROOT / 'packages' / p}[{extras}]" for p in PACKAGES])
    if nvcc:
        # Kernels are compile-checked on every machine; the wheels make that work without a CUDA
        # toolkit, and test_jit compiles with the wheel's nvcc even where a toolkit exists.
        session.install(*NVCC_WHEELS)


@nox.session
def tests(session: nox.Session) -> None:
    """Install every package (editable, test extras) and run each package's pytest. GPU tests
    (marked `gpu`) skip cleanly without CUDA."""
    _install_all(session)
    failed = []
    for package in PACKAGES:
        with session.chdir(ROOT / "packages" / package):
            try:
                session.run("pytest", "-q", "-p", "no:cacheprovider", *session.posargs)
            except CommandFailed:
                failed.append(package)  # keep going: one package's failure must not hide the others'
    if failed:
        session.error(f"tests failed in: {', '.join(failed)}")


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over the whole tree."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", str(ROOT))


@nox.session
def build(session: nox.Session) -> None:
    """sdist and wheel of every package into dist/."""
    session.install("build")
    dist = ROOT / "dist"
    for package in PACKAGES:
        session.run("python", "-m", "build", "--outdir", str(dist), str(ROOT / "packages" / package))
    wheels = sorted(p.name for p in dist.glob("*.whl"))
    session.log(f"{len(wheels)} wheels: {', '.join(wheels)}")


@nox.session
def demo(session: nox.Session) -> None:
    """The main job on an embedded default: a tiny Kimi-format MoE checkpoint, converted and run."""
    _install_all(session, extras="test", nvcc=False)  # the demo's GPU part runs only where CUDA is
    session.run("python", str(ROOT / "ci" / "demo.py"), *session.posargs)


@nox.session(name="install-check", reuse_venv=False)
def install_check(session: nox.Session) -> None:
    """A newcomer's install: wheels of chord-kernels and chord-pack built from this tree, installed
    in a fresh venv with torch and no extras, then `chord-pack demo` and a convert + verify."""
    work = Path(session.create_tmp())
    for leftover in ("dist", "demo", "converted"):
        shutil.rmtree(work / leftover, ignore_errors=True)
    for package in ("chord-kernels", "chord-pack"):
        session.run("python", "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(work / "dist"),
                    str(ROOT / "packages" / package))
    session.install(TORCH)
    session.install(*sorted(str(w) for w in (work / "dist").glob("*.whl")))
    session.run("chord-pack", "demo", str(work / "demo"))
    session.run("chord-pack", "convert", str(work / "demo" / "tiny-kimi-k2-thinking"), "--layout", "indexed",
                "--output", str(work / "converted"))
    session.run("chord-pack", "verify", str(work / "converted"))


@nox.session(venv_backend="none")
def gpu(session: nox.Session) -> None:
    """On a CUDA host, with its own torch: compile the kernels, run the GPU tests, print a table."""
    session.run("python3", str(ROOT / "ci" / "gpu_check.py"), *session.posargs,
                env={"PYTHONPATH": _src_path()})


@nox.session(name="bench-h200", venv_backend="none")
def bench_h200(session: nox.Session) -> None:
    """Every benchmark scenario, Chord side by side with peers (`-- --peer humming=/path`)."""
    session.run("python3", "-m", "chord_kernels.bench", "--out", str(ROOT / "bench-results" / "h200"),
                *session.posargs, env={"PYTHONPATH": _src_path()})
