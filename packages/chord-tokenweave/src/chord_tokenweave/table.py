"""The profiler's table: per token count, the split offset, the fused kernel's CTA count and
whether the two-split weave pays off; looked up by nearest token count at run time.

File format (JSON, ``format == "chord-tokenweave-table"``, ``version == 1``)::

    {"format": "chord-tokenweave-table", "version": 1,
     "model": "llama-3.3-70b", "world_size": 2, "hidden": 8192, "device": "NVIDIA H200",
     "threshold": 2048,          # weave at >= this many tokens, fused-only below (None: never)
     "align": 128,
     "entries": {"1024": {"split": 512, "num_ctas": 16, "weave": false,
                          "times_us": {"fused_only": 101.0, "tokenweave": 120.0}}, ...}}

Lookups are pure functions of the file and the token count, so all ranks that load the same
file make the same decision (the runtime can also verify that across ranks).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from chord_tokenweave.errors import TableError, TokenWeaveInputError

FORMAT = "chord-tokenweave-table"
VERSION = 1


@dataclass(frozen=True)
class TableEntry:
    """What the profiler chose for one token count."""

    split: int | None
    num_ctas: int
    weave: bool
    times_us: dict[str, float] = field(default_factory=dict)
    # The library all-reduce + add-RMSNorm measured fastest here: selective enabling falls
    # back to it, so the table's path is never slower than the sequential baseline.
    library: bool = False


@dataclass(frozen=True)
class Decision:
    """What the runtime does for one batch: weave (two splits at ``split``) or fused-only."""

    num_tokens: int
    weave: bool
    split: int | None
    num_ctas: int
    key: int | None  # the table key the decision came from (None: no table)
    library: bool = False  # run the library all-reduce + add-RMSNorm (neither fused nor woven)

    def as_tuple(self) -> tuple[int, int, int, int, int]:
        """Integers for a cross-rank consistency check (-1 stands for None)."""
        return (
            self.num_tokens,
            int(self.weave),
            -1 if self.split is None else self.split,
            self.num_ctas,
            int(self.library),
        )


@dataclass
class SplitTable:
    """Profiler output: entries keyed by token count plus the selective-enable threshold."""

    entries: dict[int, TableEntry]
    threshold: int | None
    world_size: int
    hidden: int
    model: str = ""
    device: str = ""
    align: int = 128
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.entries:
            raise TableError("a split table needs at least one entry")
        for name in ("world_size", "hidden", "align"):
            if getattr(self, name) <= 0:
                raise TableError(f"{name} must be positive, got {getattr(self, name)}")
        if self.threshold is not None and self.threshold <= 0:
            raise TableError(f"threshold must be positive or null, got {self.threshold}")
        for key, entry in self.entries.items():
            if key <= 0:
                raise TableError(f"table keys must be positive token counts, got {key}")
            if entry.num_ctas <= 0:
                raise TableError(f"entry {key}: num_ctas must be positive, got {entry.num_ctas}")
            if entry.split is not None and not 0 < entry.split < key:
                raise TableError(f"entry {key}: split {entry.split} is not inside (0, {key})")

    def nearest_key(self, num_tokens: int) -> int:
        """The key closest to ``num_tokens`` (ties go to the smaller key)."""
        if num_tokens <= 0:
            raise TokenWeaveInputError(f"num_tokens must be positive, got {num_tokens}")
        return min(self.entries, key=lambda k: (abs(k - num_tokens), k))

    def decide(self, num_tokens: int) -> Decision:
        """Weave or not, where to split, how many CTAs, for a batch of ``num_tokens`` tokens."""
        key = self.nearest_key(num_tokens)
        entry = self.entries[key]
        weave = (
            not entry.library
            and self.threshold is not None
            and num_tokens >= self.threshold
            and entry.weave
            and entry.split is not None
        )
        split = None
        if weave:
            assert entry.split is not None
            split = entry.split if key == num_tokens else _scale_split(entry.split, key,
                                                                      num_tokens, self.align)
            weave = split is not None
        return Decision(num_tokens, weave, split, entry.num_ctas, key, library=entry.library)

    def to_json(self) -> dict[str, Any]:
        """The JSON document (see the module docstring)."""
        return {
            "format": FORMAT,
            "version": VERSION,
            "model": self.model,
            "world_size": self.world_size,
            "hidden": self.hidden,
            "device": self.device,
            "threshold": self.threshold,
            "align": self.align,
            "meta": self.meta,
            "entries": {str(k): asdict(v) for k, v in sorted(self.entries.items())},
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any], *, source: str = "<table>") -> SplitTable:
        """Parse and validate a JSON document (types checked strictly: ``"weave": "false"``
        is an error, not ``True``)."""
        if not isinstance(doc, Mapping):
            raise TableError(f"{source}: malformed table: expected a JSON object, found {type(doc).__name__}")
        if doc.get("format") != FORMAT:
            raise TableError(f"{source}: format is {doc.get('format')!r}, expected {FORMAT!r}")
        if doc.get("version") != VERSION:
            raise TableError(f"{source}: version {doc.get('version')!r}, expected {VERSION}")
        raw = doc.get("entries")
        if not isinstance(raw, Mapping):
            raise TableError(f"{source}: malformed table: 'entries' must be an object keyed by token count, "
                             f"found {type(raw).__name__}")
        entries = {}
        for k, v in raw.items():
            where = f"{source}: malformed table: entry {k!r}"
            try:
                key = int(k)
            except ValueError:
                raise TableError(f"{where}: key must be a token count (integer)") from None
            if not isinstance(v, Mapping):
                raise TableError(f"{where}: expected an object, found {type(v).__name__}")
            times = v.get("times_us", {})
            if not isinstance(times, Mapping) or not all(
                isinstance(t, int | float) and not isinstance(t, bool) for t in times.values()
            ):
                raise TableError(f"{where}: 'times_us' must map names to numbers, found {times!r}")
            entries[key] = TableEntry(
                split=_field(v, "split", int, where, optional=True),
                num_ctas=_field(v, "num_ctas", int, where),
                weave=_field(v, "weave", bool, where),
                times_us={str(n): float(t) for n, t in times.items()},
                library=_field(v, "library", bool, where, default=False),
            )
        meta = doc.get("meta", {})
        if not isinstance(meta, Mapping):
            raise TableError(f"{source}: malformed table: 'meta' must be an object, found {type(meta).__name__}")
        where = f"{source}: malformed table"
        threshold = _field(doc, "threshold", int, where, optional=True)
        world_size = _field(doc, "world_size", int, where)
        hidden = _field(doc, "hidden", int, where)
        align = _field(doc, "align", int, where, default=128)
        try:
            return cls(
                entries=entries, threshold=threshold, world_size=world_size, hidden=hidden,
                model=str(doc.get("model", "")), device=str(doc.get("device", "")),
                align=align, meta=dict(meta),
            )
        except TableError as exc:
            raise TableError(f"{source}: {exc}") from None

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write atomically (temp file + rename) so a reader never sees half a table."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "w") as fh:
            json.dump(self.to_json(), fh, indent=1, sort_keys=False)
            fh.write("\n")
        os.replace(tmp, path)
        return path

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        *,
        world_size: int | None = None,
        hidden: int | None = None,
    ) -> SplitTable:
        """Read a table; refuse one profiled for a different world size or hidden size."""
        path = Path(path)
        try:
            doc = json.loads(path.read_text())
        except FileNotFoundError as exc:
            raise TableError(f"no split table at {path}") from exc
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise TableError(f"{path}: not valid JSON ({exc})") from exc
        except OSError as exc:
            raise TableError(f"{path}: cannot read the split table ({exc})") from exc
        table = cls.from_json(doc, source=str(path))
        if world_size is not None and table.world_size != world_size:
            raise TableError(
                f"{path}: profiled for world size {table.world_size}, running with {world_size}"
            )
        if hidden is not None and table.hidden != hidden:
            raise TableError(f"{path}: profiled for hidden {table.hidden}, model has {hidden}")
        return table


def choose_threshold(weave_wins: Mapping[int, bool]) -> int | None:
    """Smallest token count from which the weave wins at every larger profiled count.

    Selective enabling must be monotone (one threshold), so an isolated win below a loss does
    not count. ``None`` if the weave never wins at the largest count.
    """
    threshold = None
    for key in sorted(weave_wins, reverse=True):
        if not weave_wins[key]:
            break
        threshold = key
    return threshold


_MISSING = object()


def _field(
    doc: Mapping[str, Any], name: str, kind: type, where: str, *, optional: bool = False,
    default: Any = _MISSING,
) -> Any:
    """``doc[name]`` if it is exactly a ``kind`` (bools are not ints), else :class:`TableError`."""
    if name not in doc:
        if default is not _MISSING:
            return default
        if not optional:
            raise TableError(f"{where}: missing field {name!r}")
        return None
    value = doc[name]
    if value is None and optional:
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        want = kind.__name__ + (" or null" if optional else "")
        raise TableError(f"{where}: field {name!r} must be {want}, found {value!r}")
    return value


def _scale_split(split: int, key: int, num_tokens: int, align: int) -> int | None:
    """Carry a split from a nearby key to ``num_tokens``, keeping its fraction and alignment."""
    scaled = round(split * num_tokens / key / align) * align
    if 0 < scaled < num_tokens:
        return scaled
    half = num_tokens // 2
    return half if 0 < half < num_tokens else None
