"""Build, test, lint, demo and GPU sessions for the Chord monorepo. `nox -l` lists them."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import nox
from nox.command import CommandFailed

ROOT = Path(__file__).parent
PACKAGES = ("chord-kernels", "chord-pack", "chord-vllm", "chord-tokenweave", "chord-bench")
# CI and laptops test on the CPU wheel; on a CUDA host set CHORD_TORCH to the torch you serve with.
TORCH = os.environ.get("CHORD_TORCH", "torch==2.13.0")

VLLM_VERSION = "0.33.0"
VLLM = f"vllm=={VLLM_VERSION}"
"""The vLLM release chord-vllm is tested against (its CUDA wheel; the CPU tests use its Python)."""
VLLM_DEPS = (
    "packaging", "numpy", "psutil", "pyzmq", "regex", "pydantic>=2.12", "cbor2",
    "transformers>=5.16.1,<5.21", "aiohttp", "requests", "oss-harmony", "openai", "pillow", "pybase64",
    "cachetools", "msgspec", "cloudpickle", "uvloop", "py-cpuinfo", "prometheus_client",
    "fastapi>=0.133,<0.137", "partial-json-parser", "llguidance>=1.7,<1.8", "einops",
    "compressed-tensors==0.17.0",
)
"""What importing vLLM's model-executor classes needs, without its CUDA stack (torch 2.14,
flashinfer, triton...): vLLM itself is installed without dependencies, on the CPU torch."""
VLLM_NO_DEPS = ("xgrammar==0.2.8", "apache-tvm-ffi")
"""Imported by vLLM; their own dependencies would pull triton (1 GB), which nothing here runs."""

nox.options.sessions = ["tests", "lint"]
nox.options.reuse_existing_virtualenvs = True


def _src_path() -> str:
    return os.pathsep.join(str(ROOT / "packages" / p / "src") for p in PACKAGES)


def _install_all(session: nox.Session) -> None:
    session.install(TORCH)
    # Kernels are compile-checked on every machine: chord-kernels' nvcc extra (PyPI's nvcc wheels) makes
    # that work without a CUDA toolkit, and test_jit compiles with the wheel's nvcc even where one exists.
    extras = {"chord-kernels": "[test,nvcc]"}
    session.install(*[f"-e{ROOT / 'packages' / p}{extras.get(p, '[test]')}" for p in PACKAGES])


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
def vllm(session: nox.Session) -> None:
    """chord-vllm's tests against the real vLLM 0.33 classes, on CPU: vLLM's wheel without its
    dependencies, the pure-Python ones it imports, the CPU torch. Fails if vLLM is missing."""
    cache = Path(os.environ.get("CHORD_WHEEL_CACHE", Path.home() / ".cache" / "chord" / "wheels"))
    # vLLM's wheel is 336 MB: keep it across runs (pip skips a file already in the folder).
    session.run("python", "-m", "pip", "download", "--quiet", "--no-deps", "--dest", str(cache), VLLM)
    session.install(TORCH)
    wheel = max(cache.glob(f"vllm-{VLLM_VERSION}-*.whl"))
    session.install("--no-deps", str(wheel))
    pins = Path(session.create_tmp()) / "torch-pin.txt"
    pins.write_text(TORCH + "\n")  # nothing below may replace the CPU torch
    session.install("--constraint", str(pins), *VLLM_DEPS)
    session.install("--no-deps", *VLLM_NO_DEPS)
    session.install(*[f"-e{ROOT / 'packages' / p}[test]" for p in ("chord-kernels", "chord-pack", "chord-vllm")])
    with session.chdir(ROOT / "packages" / "chord-vllm"):
        session.run("pytest", "-q", "-p", "no:cacheprovider", *session.posargs,
                    env={"VLLM_TARGET_DEVICE": "cpu", "CHORD_REQUIRE_VLLM": "1"})


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
    # The two packages the demo runs, without test extras (Triton alone is 1 GB); no nvcc wheels:
    # the demo's GPU part runs only where CUDA, and so a toolkit, is.
    session.install(TORCH)
    session.install(*[f"-e{ROOT / 'packages' / p}" for p in ("chord-kernels", "chord-pack")])
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
    """On the H200, with its own torch: every scenario, Chord side by side with the reference, the
    bf16 ceiling and, with `-- --peer humming-kernels`, every humming-kernels path vLLM 0.33 would
    run (humming importable from the caller's PYTHONPATH or site-packages)."""
    path = os.pathsep.join(p for p in (_src_path(), os.environ.get("PYTHONPATH", "")) if p)
    session.run("python3", "-m", "chord_bench", "--out", str(ROOT / "bench-results" / "h200"),
                *session.posargs, env={"PYTHONPATH": path})
