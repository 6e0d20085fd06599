"""What chord-pack tells users in writing: the model card it generates and docs/chord-pack.md."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from chord_pack import __version__
from chord_pack.convert import convert

DOC = Path(__file__).resolve().parents[3] / "docs" / "chord-pack.md"


@pytest.mark.parametrize("layout", ["indexed", "contiguous", "masked"])
def test_model_card_says_only_what_works_today(tiny: Path, tmp_path: Path, layout: str) -> None:
    out = convert(tiny, tmp_path / "out", layout).output
    card = (out / "README.md").read_text()
    body = " ".join(card.split("\n---\n", 1)[1].split())
    assert f"**{layout}** layout (family `{'indexed' if layout == 'indexed' else 'grouped'}`, mode `{layout}`" in body
    assert f"As of chord-pack {__version__}, " in body and "chord-pack verify" in body
    # chord-vllm serves all three, in expert ranges by default (schema 2; E=4: 4 ranges of 1 expert)
    assert "vLLM with the chord-vllm plugin serves this checkpoint as it is, on Chord's indexed kernels" in body
    assert "an expert-parallel rank reads only the expert ranges holding its experts" in body
    assert "(schema version 2)" in body and "`...mlp.experts.chord.{w13,w2}.experts_{first}_{last}.*` (1 expert each)" in body
    if layout != "indexed":
        assert f"`chord_kernels.grouped.{layout}` runs them" in body and "the indexed layout's tiles" in body
    assert not re.search(r"(?i)load (them|this|these) with .*chord-vllm", body)


@pytest.mark.skipif(not DOC.is_file(), reason="docs/ is not next to this checkout of the tests")
def test_format_doc_names_each_field_once_and_stands_alone(tiny: Path, tmp_path: Path) -> None:
    doc = DOC.read_text()
    assert "DESIGN.md" not in doc and "BENCHMARKS.md" not in doc and "shared/" not in doc
    assert "source.path" not in doc  # the field is `local_path`
    for layout in ("test-reversed", "masked"):  # all experts per tensor, and expert ranges
        out = convert(tiny, tmp_path / layout, layout).output
        block = json.loads((out / "config.json").read_text())["chord_pack"]
        for key in [*block, *block["source"]]:  # every field a converted checkpoint records is documented
            assert f'"{key}"' in doc or f"`{key}`" in doc, key
