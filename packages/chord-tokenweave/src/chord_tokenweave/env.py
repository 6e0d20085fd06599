"""The no-multicast rule: NVLink multicast / multimem / NVLS is never used on our machines.

These variables must be in the environment before NCCL communicators or symmetric memory are
created; :func:`disable_multicast` sets them (overriding other values, with a warning). Importing
``chord_tokenweave`` calls it (so the library all-reduce of the sequential baseline is covered too),
and the launcher, the CLI and :class:`~chord_tokenweave.workspace.SymmetricWorkspace` call it again.
It cannot reach back: an NCCL communicator created before the import keeps the environment it saw.
"""

from __future__ import annotations

import os
import warnings

NO_MULTICAST_ENV: dict[str, str] = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}

EXPORT_LINE = "export " + " ".join(f"{k}={v}" for k, v in NO_MULTICAST_ENV.items()) + ";"


def disable_multicast() -> None:
    """Force the no-multicast variables into ``os.environ`` (idempotent)."""
    for key, value in NO_MULTICAST_ENV.items():
        old = os.environ.get(key)
        if old is not None and old != value:
            warnings.warn(
                f"{key}={old} would allow NVLink multicast; forcing {key}={value}",
                RuntimeWarning,
                stacklevel=2,
            )
        os.environ[key] = value


def multicast_env_ok() -> bool:
    """True when every no-multicast variable has its required value."""
    return all(os.environ.get(k) == v for k, v in NO_MULTICAST_ENV.items())
