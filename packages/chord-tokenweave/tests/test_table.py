from __future__ import annotations

import json
from pathlib import Path

import pytest

from chord_tokenweave.errors import TableError, TokenWeaveInputError
from chord_tokenweave.table import SplitTable, TableEntry, choose_threshold


def _table(threshold: int | None = 2048) -> SplitTable:
    return SplitTable(
        entries={
            1024: TableEntry(split=512, num_ctas=8, weave=False),
            2048: TableEntry(split=1024, num_ctas=16, weave=True, times_us={"tokenweave": 1.0}),
            4096: TableEntry(split=2176, num_ctas=16, weave=True),
            8192: TableEntry(split=4224, num_ctas=32, weave=True),
        },
        threshold=threshold, world_size=2, hidden=8192, model="m", align=128,
    )


def test_nearest_key_and_ties() -> None:
    t = _table()
    assert t.nearest_key(1) == 1024
    assert t.nearest_key(1536) == 1024  # tie between 1024 and 2048 goes to the smaller key
    assert t.nearest_key(1537) == 2048
    assert t.nearest_key(100_000) == 8192
    with pytest.raises(TokenWeaveInputError):
        t.nearest_key(0)


def test_decide_exact_scaled_and_threshold() -> None:
    t = _table()
    d = t.decide(4096)
    assert (d.weave, d.split, d.num_ctas, d.key) == (True, 2176, 16, 4096)
    d = t.decide(5000)  # nearest 4096: keep the fraction, stay on the 128 grid
    assert d.weave and d.split is not None and d.split % 128 == 0 and 0 < d.split < 5000
    assert abs(d.split / 5000 - 2176 / 4096) < 128 / 5000
    assert not t.decide(1024).weave  # below the threshold: fused-only
    assert t.decide(1024).num_ctas == 8
    assert not _table(threshold=None).decide(8192).weave


def test_round_trip(tmp_path: Path) -> None:
    t = _table()
    path = t.save(tmp_path / "sub" / "table.json")
    back = SplitTable.load(path, world_size=2, hidden=8192)
    assert back.entries == t.entries and back.threshold == 2048 and back.model == "m"
    assert json.loads(path.read_text())["entries"]["2048"]["times_us"] == {"tokenweave": 1.0}


def test_load_refuses_mismatches(tmp_path: Path) -> None:
    path = _table().save(tmp_path / "t.json")
    with pytest.raises(TableError, match="world size 2"):
        SplitTable.load(path, world_size=4)
    with pytest.raises(TableError, match="hidden 8192"):
        SplitTable.load(path, hidden=6144)
    with pytest.raises(TableError, match="no split table"):
        SplitTable.load(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(TableError, match="not valid JSON"):
        SplitTable.load(tmp_path / "bad.json")
    doc = json.loads(path.read_text())
    doc["version"] = 99
    (tmp_path / "v.json").write_text(json.dumps(doc))
    with pytest.raises(TableError, match="version"):
        SplitTable.load(tmp_path / "v.json")
    doc["version"] = 1
    del doc["entries"]["1024"]["num_ctas"]
    (tmp_path / "m.json").write_text(json.dumps(doc))
    with pytest.raises(TableError, match="malformed"):
        SplitTable.load(tmp_path / "m.json")


def test_invalid_entries() -> None:
    with pytest.raises(TableError):
        SplitTable(entries={}, threshold=None, world_size=2, hidden=8)
    with pytest.raises(TableError):
        SplitTable(entries={100: TableEntry(split=100, num_ctas=1, weave=True)},
                   threshold=None, world_size=2, hidden=8)
    with pytest.raises(TableError):
        SplitTable(entries={100: TableEntry(split=50, num_ctas=0, weave=True)},
                   threshold=None, world_size=2, hidden=8)


def test_choose_threshold_is_monotone() -> None:
    assert choose_threshold({1024: False, 2048: True, 4096: True}) == 2048
    assert choose_threshold({1024: True, 2048: False, 4096: True}) == 4096
    assert choose_threshold({1024: True, 2048: True}) == 1024
    assert choose_threshold({1024: True, 2048: False}) is None


def test_library_fallback_entry(tmp_path: Path) -> None:
    t = _table()
    t.entries[4096] = TableEntry(split=2176, num_ctas=16, weave=True, library=True)
    d = t.decide(4096)
    assert d.library and not d.weave and d.split is None
    assert d.as_tuple() == (4096, 0, -1, 16, 1)
    loaded = SplitTable.load(t.save(tmp_path / "t.json"), world_size=2)
    assert loaded.entries[4096].library and not loaded.entries[8192].library
    # Tables written before the field existed load with library=False.
    doc = t.to_json()
    for entry in doc["entries"].values():
        entry.pop("library")
    assert not any(e.library for e in SplitTable.from_json(doc).entries.values())


_GOOD_ENTRY = {"split": 128, "num_ctas": 8, "weave": True}


@pytest.mark.parametrize(
    ("doc", "match"),
    [
        ([1, 2], "expected a JSON object, found list"),
        ({"entries": [1]}, "'entries' must be an object"),
        ({"entries": {"256": 5}}, "entry '256': expected an object, found int"),
        ({"entries": {"256": {**_GOOD_ENTRY, "weave": "false"}}}, "'weave' must be bool"),
        ({"entries": {"256": {**_GOOD_ENTRY, "library": "no"}}}, "'library' must be bool"),
        ({"entries": {"256": {**_GOOD_ENTRY, "split": 128.7}}}, "'split' must be int or null"),
        ({"entries": {"256": {**_GOOD_ENTRY, "times_us": [1]}}}, "'times_us' must map"),
        ({"entries": {"x": _GOOD_ENTRY}}, "key must be a token count"),
        ({"align": 0}, "align must be positive, got 0"),
        ({"world_size": 0}, "world_size must be positive, got 0"),
        ({"hidden": "64"}, "'hidden' must be int"),
        ({"threshold": 1.5}, "'threshold' must be int or null"),
        ({"meta": [1]}, "'meta' must be an object"),
    ],
)
def test_malformed_tables_raise_table_error(tmp_path: Path, doc: object, match: str) -> None:
    """Every malformed file is a TableError naming what was expected and found (not an
    AttributeError / ZeroDivisionError later, and never ``"false"`` read as true)."""
    if isinstance(doc, dict):
        doc = {"format": "chord-tokenweave-table", "version": 1, "world_size": 2, "hidden": 64,
               "threshold": 128, "entries": {"256": _GOOD_ENTRY}, **doc}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(TableError, match=match):
        SplitTable.load(path).decide(300)


def test_unreadable_table_files_raise_table_error(tmp_path: Path) -> None:
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe garbage")
    with pytest.raises(TableError, match="not valid JSON"):
        SplitTable.load(tmp_path / "bin.json")
    with pytest.raises(TableError, match="cannot read"):
        SplitTable.load(tmp_path)  # a directory
