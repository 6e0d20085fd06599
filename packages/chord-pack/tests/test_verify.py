"""verify catches damaged shards, wrong digests and damaged unpacks; it names the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chord_pack.convert import convert
from chord_pack.errors import ChordPackError, VerifyError
from chord_pack.st import read_header
from chord_pack.verify import verify


@pytest.fixture
def converted(tiny: Path, tmp_path: Path) -> Path:
    return convert(str(tiny), tmp_path / "out", "test-reversed", "test_a", max_shard_bytes=200_000).output


def _packed_shard(out: Path) -> tuple[Path, str]:
    weight_map = json.loads((out / "model.safetensors.index.json").read_text())["weight_map"]
    name = next(n for n in weight_map if ".experts.chord.w13.codes" in n)
    return out / weight_map[name], name


def test_clean_output_verifies_with_and_without_source(converted: Path, tiny: Path) -> None:
    full = verify(converted)
    assert full.ok and full.source is not None and full.tensors_compared > 0
    alone = verify(converted, use_recorded_source=False)
    assert alone.ok and alone.source is None and alone.projections_checked == 4


def test_flipped_byte_in_expert_data_is_caught(converted: Path) -> None:
    shard, name = _packed_shard(converted)
    info = read_header(shard).tensors[name]
    data = bytearray(shard.read_bytes())
    data[info.begin + 5] ^= 0x10
    shard.write_bytes(bytes(data))
    report = verify(converted)
    assert any(shard.name in p and "sha256" in p for p in report.problems)
    assert any("layer" in p and "do not match the source digest" in p for p in report.problems)
    assert any("differs from source" in p for p in report.problems)
    with pytest.raises(VerifyError, match=shard.name):
        report.raise_if_failed()


def test_truncated_output_shard_is_named(converted: Path) -> None:
    shard, _ = _packed_shard(converted)
    shard.write_bytes(shard.read_bytes()[:-100])
    problems = verify(converted).problems
    assert any(f"{shard.name} is truncated" in p for p in problems)
    assert any("bytes, config.json records" in p for p in problems)


def test_wrong_recorded_digest_is_caught_without_source(converted: Path) -> None:
    config = json.loads((converted / "config.json").read_text())
    key = "layers.2.up_proj"
    config["chord_pack"]["source_digests"][key] = "0" * 64
    (converted / "config.json").write_text(json.dumps(config))
    problems = verify(converted, use_recorded_source=False).problems
    assert problems == [
        "layer 2 up_proj: unpacked codes/scales do not match the source digest recorded at conversion"
    ]


def test_not_a_chord_pack_output(tiny: Path) -> None:
    with pytest.raises(VerifyError, match="no chord_pack block"):
        verify(tiny)


def test_no_source_catches_a_changed_source_and_says_what_it_could_not_check(converted: Path, tiny: Path) -> None:
    from test_convert import change_source_tensor
    from typer.testing import CliRunner

    from chord_pack.cli import app

    runner = CliRunner()
    assert runner.invoke(app, ["verify", str(converted), "--no-source"]).exit_code == 0
    change_source_tensor(tiny, "model.layers.2.mlp.experts.3.up_proj.weight_scale")
    report = verify(converted, compare_experts=False)
    assert report.problems == [
        f"layer 2 up_proj: the source {tiny} no longer matches the digest recorded at conversion "
        "(it changed after the conversion: the output is stale)"
    ]
    res = runner.invoke(app, ["verify", str(converted), "--no-source"])
    assert res.exit_code == 1 and "layer 2 up_proj: the source" in res.output

    tiny.rename(tiny.with_name("moved-away"))
    report = verify(converted, compare_experts=False)
    assert report.ok and report.source is None
    assert report.unchecked == (
        f"the recorded source {tiny} is not on this machine, so the expert digests were checked only "
        "against the ones recorded at conversion, and 43 non-expert tensors were not compared with the source"
    )
    res = runner.invoke(app, ["verify", str(converted), "--no-source"])
    assert res.exit_code == 0 and f"not checked against the source: the recorded source {tiny}" in res.output


def test_upload_refuses_an_output_whose_source_changed(converted: Path, tiny: Path) -> None:
    from test_convert import change_source_tensor

    from chord_pack.upload import upload

    change_source_tensor(tiny, "model.layers.1.mlp.experts.0.gate_proj.weight_packed")
    with pytest.raises(VerifyError, match=r"(?s)refusing to upload.*layer 1 gate_proj: the source .* no longer matches"):
        upload(converted, "nobody/never-reached")


def _edit_json(path: Path, change) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def test_index_that_lost_a_tensor_is_caught_with_and_without_source(converted: Path, tiny: Path,
                                                                    tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from chord_pack.cli import app

    index = converted / "model.safetensors.index.json"
    shard = json.loads(index.read_text())["weight_map"]["model.embed_tokens.weight"]
    _edit_json(index, lambda d: d["weight_map"].pop("model.embed_tokens.weight"))
    lacks = "the output's model.safetensors.index.json lacks 1 tensors its shards hold: model.embed_tokens.weight"
    report = verify(converted)  # the source is there: not mistaken for another checkpoint
    assert report.source is not None and [p for p in report.problems if "lacks" in p] == [f"{lacks} (in {shard})"]
    assert not [p for p in report.problems if "is not the checkpoint" in p]
    assert verify(converted, compare_experts=False).problems == report.problems
    assert any(lacks in p for p in verify(converted, use_recorded_source=False).problems)
    res = CliRunner().invoke(app, ["inspect", str(converted)])
    assert res.exit_code == 1 and "tensor model.embed_tokens.weight is in the file but" in res.output

    _edit_json(index, lambda d: d["metadata"].update(total_size=1))
    assert any("metadata.total_size is 1, but the shards hold" in p for p in verify(converted).problems)


def test_damaged_output_header_is_a_finding_not_a_crash(converted: Path) -> None:
    shard, _ = _packed_shard(converted)
    data = bytearray(shard.read_bytes())
    data[20] ^= 0x01  # inside the first entry's JSON: now a key or value safetensors would refuse
    shard.write_bytes(bytes(data))
    problems = verify(converted).problems
    assert any(p.startswith(f"{shard}: ") and "tensor" in p for p in problems), problems
    assert any(f"{shard}: sha256" in p for p in problems)


@pytest.mark.parametrize("key", ["projections", "moe_layers", "num_experts", "tensor_names"])
def test_block_missing_a_key_is_a_finding(converted: Path, key: str) -> None:
    _edit_json(converted / "config.json", lambda d: d["chord_pack"].pop(key))
    with pytest.raises(VerifyError, match=rf"chord_pack\.{key} is None, expected "):
        verify(converted)


def test_not_a_directory_or_not_json_objects(converted: Path, tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    with pytest.raises(VerifyError, match="not a directory"):
        verify(a_file)
    (converted / "model.safetensors.index.json").write_text("[]")
    with pytest.raises(ChordPackError, match=r"model\.safetensors\.index\.json: expected a JSON object, found a list"):
        verify(converted)
    (converted / "config.json").write_text("[]")
    with pytest.raises(ChordPackError, match=r"config\.json: expected a JSON object, found a list"):
        verify(converted)


def test_wrong_or_missing_recorded_digest_is_named_as_such(converted: Path) -> None:
    config = converted / "config.json"
    _edit_json(config, lambda d: d["chord_pack"]["source_digests"].update({"layers.2.up_proj": "0" * 64}))
    problems = verify(converted).problems  # the source is there, and agrees with the output
    assert problems == [
        "layer 2 up_proj: unpacked codes/scales do not match the source digest recorded at conversion",
        f"layer 2 up_proj: the output and the source {json.loads(config.read_text())['chord_pack']['source']['local_path']}"
        " agree, so the digest recorded in chord_pack.source_digests is what is wrong",
    ]
    _edit_json(config, lambda d: d["chord_pack"]["source_digests"].pop("layers.2.up_proj"))
    assert verify(converted).problems == [
        "layer 2 up_proj: no source digest recorded (chord_pack.source_digests lacks layers.2.up_proj)"]
    _edit_json(config, lambda d: d["chord_pack"].pop("source_digests"))
    assert verify(converted).problems == [
        "chord_pack.source_digests: none recorded, so the unpacked experts could not be checked"]
