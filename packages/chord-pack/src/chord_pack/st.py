"""Streaming safetensors reader and writer.

chord-pack reads tensors with plain ``seek`` + ``readinto`` (no mmap) and writes shards whose
header is known up front, one tensor at a time. That keeps resident memory at one tensor (or
one copy chunk) rather than one file, lets a non-expert tensor be copied byte for byte without
decoding it, and makes a truncated or inconsistent file fail with its name and the tensor.
The on-disk format is plain safetensors: readable by ``safetensors.safe_open``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from chord_pack.errors import CheckpointError, os_errors

ITEMSIZE: dict[str, int] = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8,
    "U32": 4, "U16": 2, "U8": 1, "BOOL": 1, "C64": 8, "F8_E4M3": 1, "F8_E5M2": 1,
    "F8_E4M3FNUZ": 1, "F8_E5M2FNUZ": 1, "F8_E8M0": 1,
}
"""Every safetensors dtype chord-pack can copy (copies never decode the bytes)."""
_TORCH_NAMES = {
    "F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64",
    "I32": "int32", "I16": "int16", "I8": "int8", "U64": "uint64", "U32": "uint32", "U16": "uint16",
    "U8": "uint8", "BOOL": "bool", "C64": "complex64", "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2", "F8_E4M3FNUZ": "float8_e4m3fnuz", "F8_E5M2FNUZ": "float8_e5m2fnuz",
    "F8_E8M0": "float8_e8m0fnu",
}
DTYPES: dict[str, torch.dtype] = {
    k: getattr(torch, v) for k, v in _TORCH_NAMES.items() if isinstance(getattr(torch, v, None), torch.dtype)
}
DTYPE_NAMES: dict[torch.dtype, str] = {v: k for k, v in DTYPES.items()}

MAX_HEADER_BYTES = 100 * 1024 * 1024
COPY_CHUNK_BYTES = 64 * 1024 * 1024
"""Largest buffer used to copy a non-expert tensor (so a 2 GB embedding never sits in memory)."""


@dataclass(frozen=True)
class TensorInfo:
    """Where one tensor lives inside a safetensors file."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int
    """Absolute file offset of the first data byte."""
    nbytes: int

    @property
    def torch_dtype(self) -> torch.dtype:
        if self.dtype not in DTYPES:
            raise CheckpointError(f"tensor {self.name}: dtype {self.dtype} has no torch equivalent here")
        return DTYPES[self.dtype]


@dataclass(frozen=True)
class Header:
    """A parsed safetensors header."""

    path: Path
    tensors: dict[str, TensorInfo]
    metadata: dict[str, str]
    file_size: int


def nbytes_of(dtype: str, shape: tuple[int, ...]) -> int:
    count = 1
    for d in shape:
        count *= d
    return count * ITEMSIZE[dtype]


def read_header(path: Path) -> Header:
    """Parse and validate the header of ``path``; a short file fails naming the tensor it cuts."""
    path = Path(path)
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            raw_len = f.read(8)
            if len(raw_len) < 8:
                raise CheckpointError(f"{path}: not a safetensors file (only {size} bytes)")
            (header_len,) = struct.unpack("<Q", raw_len)
            if header_len > MAX_HEADER_BYTES or 8 + header_len > size:
                raise CheckpointError(
                    f"{path}: header claims {header_len} bytes but the file has {size} bytes "
                    "(truncated or not safetensors)"
                )
            raw = f.read(header_len)
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{path}: header is not valid JSON ({exc})") from exc
    # Validated as safetensors itself does: a header it would refuse must not make chord-pack read
    # the wrong bytes (negative or overlapping offsets would hash or copy header bytes as weights).
    if not isinstance(doc, dict):
        raise CheckpointError(f"{path}: header is a JSON {type(doc).__name__}, expected an object")
    metadata = doc.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise CheckpointError(f"{path}: header __metadata__ must map strings to strings, found {metadata!r:.200}")
    data_start = 8 + header_len
    tensors: dict[str, TensorInfo] = {}
    spans: list[tuple[int, int, str]] = []
    for name, entry in doc.items():
        dtype, shape, start, end = _entry(path, name, entry)
        want = nbytes_of(dtype, shape)
        if end - start != want:
            raise CheckpointError(
                f"{path}: tensor {name} ({dtype} {list(shape)}) should span {want} bytes, "
                f"header says {end - start}"
            )
        if data_start + end > size:
            raise CheckpointError(
                f"{path} is truncated: tensor {name} needs bytes up to {data_start + end} but the "
                f"file has {size} bytes"
            )
        tensors[name] = TensorInfo(name, dtype, shape, data_start + start, want)
        spans.append((start, end, name))
    covered, last = 0, None
    for start, end, name in sorted(spans):
        if start != covered:
            what = f"overlaps tensor {last}" if start < covered else f"leaves bytes {covered}..{start} unused"
            raise CheckpointError(f"{path}: tensor {name} has data_offsets [{start}, {end}], which {what}; "
                                  "expected tensors back to back from 0")
        covered, last = end, name
    if data_start + covered != size:
        raise CheckpointError(f"{path}: the tensors end at byte {data_start + covered} but the file has "
                              f"{size} bytes (trailing data)")
    return Header(path, tensors, metadata, size)


def _entry(path: Path, name: str, entry: object) -> tuple[str, tuple[int, ...], int, int]:
    """dtype, shape, begin, end of header entry ``name``; anything safetensors would refuse fails."""
    def count(v: object) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v >= 0

    if not isinstance(entry, dict):
        raise CheckpointError(f"{path}: tensor {name}: header entry is {entry!r:.100}, expected an object")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if dtype not in ITEMSIZE:
        raise CheckpointError(f"{path}: tensor {name} has unknown safetensors dtype {dtype!r}")
    if not isinstance(shape, list) or not all(count(d) for d in shape):
        raise CheckpointError(f"{path}: tensor {name} has shape {shape!r}, expected a list of non-negative integers")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(count(o) for o in offsets) \
            or offsets[0] > offsets[1]:
        raise CheckpointError(f"{path}: tensor {name} has data_offsets {offsets!r}, expected [begin, end] with "
                              "0 <= begin <= end")
    return dtype, tuple(shape), offsets[0], offsets[1]


def read_tensor(path: Path, info: TensorInfo, out: torch.Tensor | None = None) -> torch.Tensor:
    """Read one tensor (a fresh CPU tensor, or into ``out`` which must match exactly)."""
    if out is None:
        out = torch.empty(info.shape, dtype=info.torch_dtype)
    elif tuple(out.shape) != info.shape or out.dtype != info.torch_dtype or not out.is_contiguous():
        raise CheckpointError(
            f"{path}: tensor {info.name} is {info.dtype} {list(info.shape)}, expected "
            f"{DTYPE_NAMES.get(out.dtype, out.dtype)} {list(out.shape)}"
        )
    if info.nbytes == 0:
        return out
    buf = out.view(-1).view(torch.uint8).numpy()
    with os_errors("read", path, CheckpointError), Path(path).open("rb") as f:
        f.seek(info.begin)
        got = f.readinto(buf)
    if got != info.nbytes:
        raise CheckpointError(f"{path}: tensor {info.name} is cut short ({got} of {info.nbytes} bytes)")
    return out


def iter_raw(path: Path, info: TensorInfo, chunk: int = COPY_CHUNK_BYTES) -> Iterator[bytes]:
    """The tensor's bytes in chunks of at most ``chunk`` bytes."""
    with os_errors("read", path, CheckpointError), Path(path).open("rb") as f:
        f.seek(info.begin)
        left = info.nbytes
        while left:
            data = f.read(min(chunk, left))
            if not data:
                raise CheckpointError(f"{path}: tensor {info.name} is cut short ({left} bytes missing)")
            left -= len(data)
            yield data


def sha256_tensors(located: Iterable[tuple[Path, TensorInfo]]) -> str:
    """sha256 of the raw bytes of the given tensors, one after the other (read, never decoded)."""
    h = hashlib.sha256()
    for path, info in located:
        for data in iter_raw(path, info):
            h.update(data)
    return h.hexdigest()


def tensor_bytes(t: torch.Tensor) -> memoryview:
    """Raw little-endian bytes of a contiguous CPU tensor (no copy)."""
    t = t.detach().contiguous()
    if t.numel() == 0:
        return memoryview(b"")
    return memoryview(t.view(-1).view(torch.uint8).numpy())


@dataclass(frozen=True)
class Entry:
    """One tensor slot of a shard being written."""

    name: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return nbytes_of(self.dtype, self.shape)


def build_header(entries: list[Entry], metadata: dict[str, str]) -> bytes:
    """The length-prefixed header for ``entries`` stored back to back, padded to 8 bytes."""
    doc: dict[str, object] = {"__metadata__": metadata}
    offset = 0
    for e in entries:
        doc[e.name] = {"dtype": e.dtype, "shape": list(e.shape), "data_offsets": [offset, offset + e.nbytes]}
        offset += e.nbytes
    raw = json.dumps(doc, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)  # the format allows trailing spaces; aligns the data start
    return struct.pack("<Q", len(raw)) + raw


class ShardWriter:
    """Writes a safetensors file whose tensors are known up front, one tensor at a time.

    Data must arrive in ``entries`` order; the sha256 of the whole file is computed on the fly.
    """

    def __init__(self, path: Path, entries: list[Entry], metadata: dict[str, str]) -> None:
        self.path = Path(path)
        self.entries = entries
        self._next = 0
        self._pending = 0  # bytes still owed to the current tensor
        self._sha = hashlib.sha256()
        with os_errors("create", self.path):
            self._file = self.path.open("wb")
        self.size = 0
        try:
            self._write(build_header(entries, metadata))
        except BaseException:
            self.abort()  # the caller never got the writer, so cannot close the file itself
            raise

    def _write(self, data: bytes | memoryview) -> None:
        with os_errors("write", self.path):
            self._file.write(data)
        self._sha.update(data)
        self.size += len(data)

    def begin(self, name: str) -> Entry:
        if self._pending:
            raise CheckpointError(f"{self.path}: tensor {self.entries[self._next - 1].name} is incomplete")
        if self._next >= len(self.entries) or self.entries[self._next].name != name:
            want = self.entries[self._next].name if self._next < len(self.entries) else "nothing"
            raise CheckpointError(f"{self.path}: expected tensor {want} next, got {name}")
        entry = self.entries[self._next]
        self._next += 1
        self._pending = entry.nbytes
        return entry

    def write_bytes(self, data: bytes | memoryview) -> None:
        if len(data) > self._pending:
            raise CheckpointError(f"{self.path}: too many bytes for tensor {self.entries[self._next - 1].name}")
        self._write(data)
        self._pending -= len(data)

    def write_tensor(self, name: str, t: torch.Tensor) -> None:
        entry = self.begin(name)
        if DTYPE_NAMES.get(t.dtype) != entry.dtype or tuple(t.shape) != entry.shape:
            raise CheckpointError(
                f"{self.path}: tensor {name} is {DTYPE_NAMES.get(t.dtype, t.dtype)} {list(t.shape)}, "
                f"the shard plan expects {entry.dtype} {list(entry.shape)}"
            )
        self.write_bytes(tensor_bytes(t))

    @property
    def done(self) -> bool:
        return self._next == len(self.entries) and not self._pending

    def close(self) -> str:
        """Flush to disk and return the sha256 of the file."""
        if not self.done:
            raise CheckpointError(f"{self.path}: closed after {self._next} of {len(self.entries)} tensors")
        with os_errors("write", self.path):
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
        return self._sha.hexdigest()

    def abort(self) -> None:
        with contextlib.suppress(OSError):  # the error that made us abort is the one to report
            self._file.close()


def sha256_file(path: Path, chunk: int = 16 * 1024 * 1024) -> str:
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        while data := f.read(chunk):
            h.update(data)
    return h.hexdigest()
