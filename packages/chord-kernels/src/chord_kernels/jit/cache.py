"""Content-addressed on-disk cache of compiled cubins.

The key hashes the source, the flags, the nvcc version and every header under
``chord_kernels/include``. Writers take a per-key file lock and publish with an atomic rename, so
concurrent processes never see half a file; a sidecar records the cubin's sha256 so a corrupt or
truncated entry is detected and rebuilt instead of loaded. A second, small entry keyed without the
nvcc version names the newest cubin of each source, so that a host without nvcc runs the kernels
``chord-kernels precompile`` cached on one that has it (:func:`find_precompiled`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import subprocess
import tempfile
from pathlib import Path

from filelock import FileLock

from chord_kernels.errors import ChordCompileError, ChordInputError

INCLUDE_DIR = Path(__file__).resolve().parent.parent / "include"
BASE_FLAGS: tuple[str, ...] = ("-O3", "-std=c++17", "-cubin", "-lineinfo", "--expt-relaxed-constexpr")


def cache_dir() -> Path:
    """``$CHORD_CACHE_DIR``, else ``~/.cache/chord/jit``."""
    root = os.environ.get("CHORD_CACHE_DIR") or Path.home() / ".cache" / "chord" / "jit"
    path = Path(root)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ChordInputError(f"JIT cache ($CHORD_CACHE_DIR or ~/.cache/chord/jit): expected a directory Chord can "
                              f"create and write, got {str(path)!r} ({exc.strerror or exc})") from None
    return path


@functools.cache
def include_digest() -> str:
    """Hash of every header Chord's device code may include."""
    h = hashlib.sha256()
    for header in sorted(INCLUDE_DIR.rglob("*")):
        if header.is_file():
            h.update(str(header.relative_to(INCLUDE_DIR)).encode())
            h.update(header.read_bytes())
    return h.hexdigest()


def cache_key(source: str, flags: list[str], nvcc_version: str) -> str:
    h = hashlib.sha256()
    for part in (source, "\0".join(flags), nvcc_version, include_digest()):
        h.update(part.encode())
        h.update(b"\x1f")
    return h.hexdigest()[:32]


ANY_NVCC = "any nvcc"
"""What :func:`find_precompiled`'s key hashes in place of the nvcc version."""


def _any_nvcc_ref(root: Path, name: str, source: str, flags: list[str]) -> Path:
    return root / f"{name}-{cache_key(source, flags, ANY_NVCC)}.any"


def find_precompiled(name: str, source: str, flags: list[str]) -> Path | None:
    """The cubin of ``source`` with ``flags`` that any nvcc compiled into the cache (the newest),
    for a host without nvcc; None if there is none or it fails its checksum."""
    root = cache_dir()
    try:
        file_name = _any_nvcc_ref(root, name, source, flags).read_text().strip()
    except OSError:
        return None
    if Path(file_name).name != file_name:  # a bare file name of this folder, nothing else
        return None
    cubin = root / file_name
    return cubin if _is_valid(cubin, cubin.with_suffix(".json")) else None


def _publish_any_nvcc(root: Path, name: str, source: str, flags: list[str], cubin: Path) -> None:
    ref = _any_nvcc_ref(root, name, source, flags)
    try:
        if ref.read_text().strip() == cubin.name:
            return
    except OSError:
        pass
    _atomic_write(ref, cubin.name.encode())


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _is_valid(cubin: Path, meta: Path) -> bool:
    try:
        recorded = json.loads(meta.read_text())["sha256"]
        return cubin.read_bytes()[:4] == b"\x7fELF" and _sha256(cubin) == recorded
    except (OSError, ValueError, KeyError):
        return False


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def compile_cached(name: str, source: str, nvcc: Path, flags: list[str], nvcc_version: str) -> Path:
    """Return the cached cubin for ``source``, compiling it (once, under a lock) if needed."""
    key = cache_key(source, flags, nvcc_version)
    root = cache_dir()
    cubin, meta = root / f"{name}-{key}.cubin", root / f"{name}-{key}.json"
    if _is_valid(cubin, meta):
        try:  # entries cached before there was such a ref; a read-only cache serves its hits as they are
            _publish_any_nvcc(root, name, source, flags, cubin)
        except OSError:
            pass
        return cubin
    with FileLock(str(root / f"{name}-{key}.lock"), timeout=600):
        if _is_valid(cubin, meta):  # another process finished it while we waited
            return cubin
        # The source keeps a stable path next to its cubin: -lineinfo embeds it (so builds are
        # reproducible) and profilers can show it.
        src = root / f"{name}-{key}.cu"
        _atomic_write(src, source.encode())
        with tempfile.TemporaryDirectory(dir=root, prefix=f".{name}-") as work:
            out = Path(work) / f"{name}.cubin"
            cmd = [str(nvcc), *flags, "-I", str(INCLUDE_DIR), str(src), "-o", str(out)]
            result = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if result.returncode != 0 or not out.is_file():
                raise ChordCompileError(
                    f"nvcc failed to compile kernel {name!r} (exit {result.returncode}).\n"
                    f"command: {' '.join(cmd)}\nsource kept at: {src}\n"
                    f"--- nvcc log ---\n{result.stderr.strip() or result.stdout.strip()}"
                )
            _atomic_write(cubin, out.read_bytes())
        record = {"sha256": _sha256(cubin), "name": name, "flags": flags, "nvcc": nvcc_version,
                  "log": result.stderr[-4000:]}
        _atomic_write(meta, json.dumps(record, indent=1).encode())
        _publish_any_nvcc(root, name, source, flags, cubin)
    return cubin


def discard(cubin: Path) -> None:
    """Forget a cache entry (used when the driver rejects a cubin that passed the checks)."""
    cubin.unlink(missing_ok=True)
    cubin.with_suffix(".json").unlink(missing_ok=True)
