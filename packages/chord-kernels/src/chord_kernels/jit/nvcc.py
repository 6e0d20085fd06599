"""Finding nvcc and turning a GPU architecture name into compiler flags."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from chord_kernels.errors import ChordUnsupportedError, NvccNotFoundError

SUPPORTED_ARCHS: tuple[str, ...] = ("sm_90a", "sm_100a", "sm_103a")
"""Architectures Chord builds for: H100/H200 (sm_90a), B200 (sm_100a), B300 (sm_103a)."""

DEFAULT_ARCH = "sm_90a"

_CAPABILITY_TO_ARCH = {(9, 0): "sm_90a", (10, 0): "sm_100a", (10, 3): "sm_103a"}


def _wheel_candidates() -> list[Path]:
    # The nvidia-cuda-nvcc wheel unpacks to site-packages/nvidia/{cuda_nvcc,cu13,...}/bin/nvcc.
    found: list[Path] = []
    for entry in sys.path:
        root = Path(entry) / "nvidia"
        if root.is_dir():
            found.extend(sorted(root.glob("*/bin/nvcc")))
    return found


def nvcc_candidates() -> list[Path]:
    """Where nvcc is looked for, in order: $CHORD_NVCC, $CUDA_HOME, $CUDA_PATH, PATH, the nvcc wheel,
    /usr/local/cuda."""
    candidates: list[Path] = []
    if os.environ.get("CHORD_NVCC"):
        candidates.append(Path(os.environ["CHORD_NVCC"]))
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            candidates.append(Path(os.environ[var]) / "bin" / "nvcc")
    on_path = shutil.which("nvcc")
    if on_path:
        candidates.append(Path(on_path))
    candidates.extend(_wheel_candidates())
    candidates.append(Path("/usr/local/cuda/bin/nvcc"))
    return candidates


def find_nvcc() -> Path:
    """The first usable nvcc, or :class:`NvccNotFoundError` listing every place tried."""
    chosen = os.environ.get("CHORD_NVCC")
    if chosen and not (Path(chosen).is_file() and os.access(chosen, os.X_OK)):  # asked for by name: no fallback
        raise NvccNotFoundError(f"CHORD_NVCC={chosen}: expected an executable nvcc, found none there; fix or "
                                "unset CHORD_NVCC")
    tried = nvcc_candidates()
    for path in tried:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    places = ", ".join(str(p) for p in tried) or "(none)"
    raise NvccNotFoundError(
        "Chord compiles its CUDA kernels with nvcc (CUDA 12.8 or newer) and found none. Tried: "
        f"{places}. Install the CUDA toolkit or NVIDIA's nvcc 13.0 wheels (`pip install "
        "'chord-kernels[nvcc]'`), or set CUDA_HOME or CHORD_NVCC."
    )


@functools.cache
def nvcc_version(nvcc: Path) -> str:
    """The ``release X.Y, VX.Y.Z`` line of ``nvcc --version`` (part of every cache key)."""
    out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, check=False)
    match = re.search(r"release [^\n]+", out.stdout)
    if out.returncode != 0 or not match:
        raise NvccNotFoundError(f"{nvcc} --version failed (exit {out.returncode}): {out.stderr.strip()}")
    return match.group(0)


def arch_flags(arch: str) -> list[str]:
    """``-gencode`` flags producing SASS for exactly ``arch`` (no PTX: no driver-side JIT)."""
    if arch not in SUPPORTED_ARCHS:
        raise ChordUnsupportedError(f"arch: expected one of {list(SUPPORTED_ARCHS)}, got {arch!r}")
    number = arch.removeprefix("sm_")
    return [f"-gencode=arch=compute_{number},code=sm_{number}"]


def arch_of_capability(major: int, minor: int) -> str:
    """The Chord architecture for a compute capability, or a clear unsupported error."""
    try:
        return _CAPABILITY_TO_ARCH[(major, minor)]
    except KeyError:
        raise ChordUnsupportedError(
            f"GPU compute capability {major}.{minor} has no Chord kernels; supported: "
            f"{ {f'{a}.{b}': arch for (a, b), arch in _CAPABILITY_TO_ARCH.items()} }"
        ) from None
