"""What chord-pack tells users in writing: the model card it generates and docs/chord-pack.md."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from chord_pack import __version__
from chord_pack.convert import convert

DOC = Path(__file__).resolve().parents[3] / "docs" / "chord-pack.md"


def test_model_card_says_only_what_works_today(tiny: Path, tmp_path: Path) -> None:
    out = convert(tiny, tmp_path / "out", "test-reversed", "test_a").output
    card = (out / "README.md").read_text()
    body = " ".join(card.split("\n---\n", 1)[1].split())
    assert f"As of chord-pack {__version__}, these weights are read through the chord-kernels Python API" in body
    assert "chord-pack verify" in body and "chord-vllm) is in development" in body
    assert "Load them with" not in body and not re.search(r"(?i)load (them|this|these) with .*chord-vllm", body)


@pytest.mark.skipif(not DOC.is_file(), reason="docs/ is not next to this checkout of the tests")
def test_format_doc_names_each_field_once_and_stands_alone(tiny: Path, tmp_path: Path) -> None:
    doc = DOC.read_text()
    assert "DESIGN.md" not in doc and "BENCHMARKS.md" not in doc and "shared/" not in doc
    assert "source.path" not in doc  # the field is `local_path`
    out = convert(tiny, tmp_path / "out", "test-reversed", "test_a").output
    block = json.loads((out / "config.json").read_text())["chord_pack"]
    for key in [*block, *block["source"]]:  # every field a converted checkpoint records is documented
        assert f'"{key}"' in doc or f"`{key}`" in doc, key
