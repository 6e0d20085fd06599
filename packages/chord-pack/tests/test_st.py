"""The safetensors header reader refuses every header safetensors itself refuses, naming file and tensor."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from chord_pack.convert import convert, partial_dir
from chord_pack.errors import CheckpointError
from chord_pack.st import read_header


def rewrite_header(path: Path, change) -> None:
    """Replace the header of ``path`` by ``change(header)`` (data offsets stay relative to the data)."""
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    raw = json.dumps(change(json.loads(data[8:8 + n]))).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data[8 + n:])


def edit(fn):
    """A header change made in place by ``fn``."""
    return lambda doc: (fn(doc), doc)[1]


@pytest.fixture
def small(tmp_path: Path) -> Path:
    path = tmp_path / "small.safetensors"
    save_file({"a": torch.arange(8, dtype=torch.int32), "b": torch.ones(2, 4, dtype=torch.bfloat16)}, str(path),
              metadata={"format": "pt"})
    assert set(read_header(path).tensors) == {"a", "b"}
    return path


BAD_HEADERS = {
    "negative offsets": (edit(lambda d: d["b"].update(data_offsets=[-4, 12])), r"tensor b has data_offsets \[-4, 12\]"),
    "aliased offsets": (edit(lambda d: d["b"].update(data_offsets=d["a"]["data_offsets"], dtype="I32", shape=[8])),
                        r"tensor (a|b) has data_offsets \[0, 32\], which overlaps tensor (a|b)"),
    "gap": (edit(lambda d: d["a"].update(shape=[6], data_offsets=[0, 24])),
            r"tensor b has data_offsets \[32, 48\], which leaves bytes 24\.\.32 unused"),
    "missing shape": (edit(lambda d: d["a"].pop("shape")), r"tensor a has shape None, expected a list"),
    "float shape": (edit(lambda d: d["a"].update(shape=[8.0])), r"tensor a has shape \[8\.0\]"),
    "missing dtype": (edit(lambda d: d["a"].pop("dtype")), r"tensor a has unknown safetensors dtype None"),
    "entry not an object": (edit(lambda d: d.update(a=[1, 2])), r"tensor a: header entry is \[1, 2\], expected an object"),
    "list header": (lambda d: [d], r"header is a JSON list, expected an object"),
    "metadata not strings": (edit(lambda d: d.update(__metadata__={"format": 1})), r"__metadata__ must map strings"),
    "reversed offsets": (edit(lambda d: d["a"].update(data_offsets=[32, 0])), r"tensor a has data_offsets \[32, 0\]"),
}


@pytest.mark.parametrize("case", sorted(BAD_HEADERS))
def test_bad_headers_are_refused_naming_file_and_tensor(small: Path, case: str) -> None:
    change, message = BAD_HEADERS[case]
    rewrite_header(small, change)
    with pytest.raises(CheckpointError, match=rf"^{small}: .*{message}"):
        read_header(small)


def test_trailing_bytes_after_the_data_are_refused(small: Path) -> None:
    small.write_bytes(small.read_bytes() + b"\0" * 8)
    with pytest.raises(CheckpointError, match=rf"{small}: the tensors end at byte \d+ but the file has \d+ bytes"):
        read_header(small)


def test_negative_offsets_in_a_source_shard_fail_before_anything_is_written(tiny: Path, tmp_path: Path) -> None:
    """Offsets pointing back into the header would copy header bytes as weights; safetensors refuses them."""
    weight_map = json.loads((tiny / "model.safetensors.index.json").read_text())["weight_map"]
    name = "model.layers.1.mlp.experts.0.gate_proj.weight_packed"
    shard = tiny / weight_map[name]

    def shift(doc):
        start, end = doc[name]["data_offsets"]
        k = start + 1000  # more than the header's own length before the data
        doc[name]["data_offsets"] = [start - k, end - k]

    rewrite_header(shard, edit(shift))
    with pytest.raises(CheckpointError, match=rf"{shard}: tensor {name} has data_offsets \[-1000, "):
        convert(tiny, tmp_path / "out", "indexed")
    assert not (tmp_path / "out").exists() and not partial_dir(tmp_path / "out").exists()
