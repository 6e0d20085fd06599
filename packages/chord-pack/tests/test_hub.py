"""Hub source, offline mode and upload, against a fake Hub on 127.0.0.1 (no other network)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from fakehub import FakeHub, SilentHub
from pack_helpers import assert_moe_equal

from chord_pack.convert import convert
from chord_pack.describe import describe
from chord_pack.errors import SourceError, UnsupportedCheckpointError, VerifyError
from chord_pack.upload import upload
from chord_pack.verify import verify


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_hub_source_then_offline(tiny: Path, tmp_path: Path, isolated_hf: Path, monkeypatch) -> None:
    with FakeHub() as hub:
        sha = hub.add_repo("moonshot-test/Kimi-Tiny", _files(tiny))
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_TOKEN", "hf_source_token")
        facts = describe("moonshot-test/Kimi-Tiny")  # metadata only: no shard is fetched
        assert facts["family"] == "kimi-k2-thinking" and facts["experts"] == 4
        assert not [r for r in hub.requests if r.endswith(".safetensors")]
        online = convert("moonshot-test/Kimi-Tiny", tmp_path / "online", "test-reversed", "test_a")
        assert any(r.startswith("GET") and r.endswith(".safetensors") for r in hub.requests)
        assert hub.tokens == {"Bearer hf_source_token"}  # HF_TOKEN is read at call time
    block = json.loads((online.output / "config.json").read_text())["chord_pack"]
    assert block["source"] == {**block["source"], "repo_id": "moonshot-test/Kimi-Tiny", "revision": sha}
    assert "local_path" not in block["source"]
    card = (online.output / "README.md").read_text()
    assert "base_model: moonshot-test/Kimi-Tiny" in card and "base_model_relation: quantized" in card

    # The fake Hub is gone: offline mode must work from the cache alone, and name what is missing.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    offline = convert("moonshot-test/Kimi-Tiny", tmp_path / "offline", "test-reversed", "test_a")
    assert offline.plan.source.revision == sha
    assert _files(offline.output) == _files(online.output)
    report = verify(offline.output)  # finds the recorded source in the HF cache
    assert report.ok and report.source is not None and report.source.repo_id == "moonshot-test/Kimi-Tiny"
    assert_moe_equal(tiny, offline.output, 1)
    with pytest.raises(SourceError, match="HF_HUB_OFFLINE is set and moonshot-test/Not-Cached@main"):
        convert("moonshot-test/Not-Cached", tmp_path / "nope", "test-reversed", "test_a")


def test_upload_arrives_intact_and_refuses_damaged(tiny: Path, tmp_path: Path, isolated_hf: Path,
                                                   monkeypatch) -> None:
    out = convert(str(tiny), tmp_path / "out", "test-reversed", "test_b", max_shard_bytes=300_000).output
    with FakeHub() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_TOKEN", "hf_test_token")
        url = upload(out, "chord-test/Kimi-Tiny-chord", private=True)
        assert url.startswith(hub.url) and "/commit/" in url
        local = _files(out)
        published = hub.repos["chord-test/Kimi-Tiny-chord"]
        assert {k: v for k, v in published.items() if k != "config.json"} == {
            k: v for k, v in local.items() if k != "config.json"}
        # The local source path stays on this machine: not in the published config, nor in any shard.
        local_path = json.loads(local["config.json"])["chord_pack"]["source"]["local_path"]
        assert local_path == str(tiny.resolve())
        public = json.loads(published["config.json"])
        assert "local_path" not in public["chord_pack"]["source"]
        assert public == {**json.loads(local["config.json"]), "chord_pack": public["chord_pack"]}
        assert not any(local_path.encode() in data for data in published.values())
        assert hub.private["chord-test/Kimi-Tiny-chord"] is True
        assert hub.tokens == {"Bearer hf_test_token"}
        assert len(hub.commits) == 1 and "chord-pack" in hub.commits[0]["summary"]
        assert "test-reversed" in hub.commits[0]["summary"]
        assert any("lfs/objects/batch" in r for r in hub.requests)  # shards went through LFS
        assert any("base_model_relation" not in v and "chord-pack" in v for v in hub.validated)

        shard = sorted(out.glob("*.safetensors"))[0]
        shard.write_bytes(shard.read_bytes()[:-1] + b"\x00")
        requests_before = len(hub.requests)
        with pytest.raises(VerifyError, match="refusing to upload"):
            upload(out, "chord-test/Kimi-Tiny-damaged")
        assert len(hub.requests) == requests_before and "chord-test/Kimi-Tiny-damaged" not in hub.repos


def test_hub_source_with_wrong_scheme_is_refused_before_downloading_shards(
        tiny: Path, tmp_path: Path, isolated_hf: Path, monkeypatch) -> None:
    files = _files(tiny)
    config = json.loads(files["config.json"])
    config["quantization_config"]["config_groups"]["group_0"]["weights"]["num_bits"] = 8
    files["config.json"] = json.dumps(config).encode()
    with FakeHub() as hub:
        hub.add_repo("moonshot-test/Kimi-W8", files)
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        with pytest.raises(UnsupportedCheckpointError, match="'num_bits': 8"):
            convert("moonshot-test/Kimi-W8", tmp_path / "out", "test-reversed", "test_a")
        assert not [r for r in hub.requests if r.endswith(".safetensors")]


def test_a_hub_that_never_answers_fails_in_seconds(tiny: Path, tmp_path: Path, isolated_hf: Path,
                                                   monkeypatch) -> None:
    """inspect, convert and upload say what they wait for, then give up after CHORD_PACK_HUB_TIMEOUT."""
    from typer.testing import CliRunner

    from chord_pack.cli import app

    runner = CliRunner()
    out = convert(str(tiny), tmp_path / "out", "test-reversed", "test_a").output
    monkeypatch.setenv("CHORD_PACK_HUB_TIMEOUT", "1")
    with SilentHub() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        for args, waits_for in (
            (["inspect", "moonshot-test/Kimi-Hangs"], "downloading config.json of moonshot-test/Kimi-Hangs@main"),
            (["convert", "moonshot-test/Kimi-Hangs", "--layout", "test-reversed", "--output", str(tmp_path / "c")],
             "downloading config.json of moonshot-test/Kimi-Hangs@main"),
            (["upload", str(out), "chord-test/Kimi-Hangs"], "creating the repo chord-test/Kimi-Hangs"),
        ):
            started = time.monotonic()
            res = runner.invoke(app, args)
            elapsed = time.monotonic() - started
            assert res.exit_code == 1, res.output
            assert elapsed < 10, f"{args[0]} took {elapsed:.1f} s"
            lines = res.output.strip().splitlines()
            waiting = [i for i, line in enumerate(lines) if line.startswith(f"waiting for {hub.url}: {waits_for}")]
            errors = [i for i, line in enumerate(lines) if line.startswith("error:")]
            assert waiting and errors == [len(lines) - 1] and waiting[0] < errors[0], res.output
            assert f"no answer from {hub.url} within 1 s while {waits_for}" in lines[-1]
            assert "CHORD_PACK_HUB_TIMEOUT" in lines[-1] and "Traceback" not in res.output
        assert hub.accepted  # the calls really went out and were left unanswered
    assert not (tmp_path / "c").exists() and not (tmp_path / ".c.chord-pack-partial").exists()


def test_masked_from_a_hub_id_to_the_hub(tiny: Path, tmp_path: Path, isolated_hf: Path, monkeypatch) -> None:
    """``convert HUB_ID --layout masked --push-to``: downloaded, packed in expert ranges, verified
    against the cached source, and published byte for byte (the local config.json aside)."""
    from typer.testing import CliRunner

    from chord_pack.cli import app

    out = tmp_path / "Kimi-Tiny-chord-masked"
    with FakeHub() as hub:
        sha = hub.add_repo("moonshot-test/Kimi-Tiny", _files(tiny))
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_TOKEN", "hf_test_token")
        res = CliRunner().invoke(app, ["convert", "moonshot-test/Kimi-Tiny", "--layout", "masked", "--output",
                                       str(out), "--push-to", "chord-test/Kimi-Tiny-chord-masked"])
        assert res.exit_code == 0, res.output
        assert "layout masked/h200_ep8, 4 expert ranges of 1" in res.output and "uploaded" in res.output
        published = hub.repos["chord-test/Kimi-Tiny-chord-masked"]
        assert published == _files(out)  # a Hub source: config.json records no local path
        assert "masked layout v2" in hub.commits[0]["summary"]
    block = json.loads((out / "config.json").read_text())["chord_pack"]
    assert (block["layout"], block["family"], block["mode"], block["schema_version"]) == ("masked", "grouped",
                                                                                          "masked", 2)
    assert block["source"] == {**block["source"], "repo_id": "moonshot-test/Kimi-Tiny", "revision": sha}
    assert "tags:" in published["README.md"].decode() and "layout-masked" in published["README.md"].decode()
    report = verify(out)  # finds the recorded source in the HF cache, with the fake Hub gone
    assert report.ok and report.source is not None and report.experts_compared == 2 * 3 * 4
    assert_moe_equal(tiny, out, 2)
