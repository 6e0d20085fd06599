"""What the plugin needs to know about its environment: the off/force switch, the tested vLLM
range, the GPU's Chord profile, nvcc, and one-line logging.

Nothing here imports vLLM at module import or initializes CUDA: vLLM loads plugins in every
process, CPU-only API servers included. Tests replace :func:`device_arch` and
:func:`nvcc_problem` to exercise the Chord path on a machine without a GPU.
"""

from __future__ import annotations

import logging
import os

ENV_SWITCH = "CHORD_VLLM"
"""``0`` turns the plugin off; ``1`` forces Chord (a failed precondition is an error, and the vLLM
version gate only warns); unset or ``auto`` serves what Chord can and leaves the rest to vLLM."""

BATCHED_SWITCH = "CHORD_VLLM_BATCHED"
"""``0`` leaves vLLM's batched activation format (DeepEP low-latency) to vLLM's own experts; unset or
``1`` runs Chord's batched experts there."""

BATCHED_WHY = ("Chord's batched experts measured 1.24-1.36x vLLM's humming grouped_masked layer on an H200, "
               "1.92x in vLLM's default 2048-row buffers")
"""Why Chord serves the batched format (docs/vllm.md and docs/performance.md have the measurement)."""

TESTED_VLLM = (0, 33)
"""The vLLM minor release whose classes the plugin overrides (``vllm>=0.33,<0.34``)."""

PROFILE_BY_ARCH = {
    "sm_90a": ("h200_tp8", "h200_ep8"),
    "sm_100a": ("b200_ep8", "b200_ep8"),
    "sm_103a": ("b300_ep8", "b300_ep8"),
}
"""Chord profile for (tensor parallel, expert parallel) deployments on each architecture.
Blackwell has only expert-parallel profiles; the indexed layout is the same for every profile, so
TP there runs the EP profile's heuristics."""

_CAPABILITY_TO_ARCH = {(9, 0): "sm_90a", (10, 0): "sm_100a", (10, 3): "sm_103a"}

logger = logging.getLogger("vllm.chord")
"""A child of vLLM's logger, so that lines appear in vLLM's log format and level."""

_logged: set[str] = set()


def log_once(level: int, message: str, key: str | None = None) -> None:
    """Log ``message`` the first time this process sees it, or its ``key`` (60 MoE layers share
    one reason)."""
    key = message if key is None else key
    if key not in _logged:
        _logged.add(key)
        logger.log(level, message)


def mode() -> str:
    """``"off"``, ``"auto"`` or ``"force"`` from ``CHORD_VLLM``; anything else is a typed error."""
    value = os.environ.get(ENV_SWITCH, "").strip().lower()
    if value in ("0", "off", "false"):
        return "off"
    if value in ("", "auto"):
        return "auto"
    if value in ("1", "on", "true", "force"):
        return "force"
    raise ValueError(f"{ENV_SWITCH}: expected 0 (off), 1 (force) or auto, got {value!r}")


def batched_wanted() -> bool:
    """Whether Chord's batched experts may serve the batched format (unless ``CHORD_VLLM_BATCHED=0``);
    a bad value is a typed error."""
    value = os.environ.get(BATCHED_SWITCH, "").strip().lower()
    if value in ("", "1", "on", "true"):
        return True
    if value in ("0", "off", "false"):
        return False
    raise ValueError(f"{BATCHED_SWITCH}: expected 1 (Chord's batched experts, the default) or 0 (vLLM's), "
                     f"got {value!r}")


def vllm_version_supported(version: str) -> bool:
    """True for every vLLM 0.33.x release, pre-release and local build."""
    from packaging.version import InvalidVersion, Version

    try:
        return Version(version).release[:2] == TESTED_VLLM
    except InvalidVersion:
        return False


def device_arch() -> tuple[str | None, str]:
    """(Chord architecture of this process's GPU, or None; why not). Uses vLLM's platform, whose
    capability query goes through NVML and does not initialize CUDA."""
    from vllm.platforms import current_platform

    if not current_platform.is_cuda():
        return None, f"the platform is {current_platform.device_name or 'not CUDA'}"
    capability = current_platform.get_device_capability()
    if capability is None:
        return None, "the GPU's compute capability is unknown"
    key = (capability.major, capability.minor)
    arch = _CAPABILITY_TO_ARCH.get(key)
    if arch is None:
        return None, f"compute capability {key[0]}.{key[1]} has no Chord kernels (needs 9.0, 10.0 or 10.3)"
    return arch, ""


def nvcc_problem() -> str | None:
    """Why Chord cannot compile its kernels here, or None when an nvcc was found."""
    try:
        from chord_kernels.jit.nvcc import find_nvcc
    except ImportError:  # a chord-kernels without this helper compiles (or fails) on first use
        return None
    try:
        find_nvcc()
    except Exception as exc:  # NvccNotFoundError: its message says where it looked
        return (f"no nvcc to compile Chord's kernels ({exc}); pip install 'chord-vllm[nvcc]', or run "
                f"`chord-kernels precompile` where nvcc is into this host's cache and set {ENV_SWITCH}=1")
    return None
