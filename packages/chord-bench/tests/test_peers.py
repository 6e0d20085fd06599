"""Peer adapters (Humming) and the bench command line, without a GPU or a real checkout."""

from __future__ import annotations

import pytest

from chord_bench import scenarios as S
from chord_bench.__main__ import main, parse_args
from chord_bench.peers import make_peer
from chord_bench.peers.humming import SWEEP, HummingPeer, _git_commit
from chord_kernels import ChordInputError

COMMIT = "2d9d953" + "0" * 33


def fake_checkout(root, *, packed_ref: bool = True):
    (root / "humming").mkdir(parents=True)
    (root / "humming" / "__init__.py").write_text("")
    (root / "humming" / "kernel.cuh").write_text("// kernel\n")
    git = root / ".git"
    git.mkdir()
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    if packed_ref:
        (git / "packed-refs").write_text(f"# pack-refs\n{COMMIT} refs/heads/main\n")
    else:
        (git / "refs" / "heads").mkdir(parents=True)
        (git / "refs" / "heads" / "main").write_text(COMMIT + "\n")
    return root


@pytest.mark.parametrize("packed_ref", [True, False])
def test_version_reads_the_commit_without_git(tmp_path, packed_ref):
    root = fake_checkout(tmp_path / "humming", packed_ref=packed_ref)
    assert _git_commit(root) == COMMIT
    peer = HummingPeer(root)
    assert peer.version.startswith("git 2d9d95300000, sources ")
    assert peer.describe()["path"] == str(root.resolve())
    # Changing a source changes the content hash.
    (root / "humming" / "kernel.cuh").write_text("// edited\n")
    assert HummingPeer(root).version != peer.version


def test_not_a_checkout_is_reported(tmp_path):
    peer = HummingPeer(tmp_path)
    assert "not a Humming checkout" in peer.unavailable()


def test_make_peer_parses_name_and_path(tmp_path):
    peer = make_peer(f"humming={fake_checkout(tmp_path / 'h')}")
    assert isinstance(peer, HummingPeer) and peer.role == "peer" and peer.name == "humming"
    with pytest.raises(ChordInputError, match="NAME=PATH"):
        make_peer("humming")
    with pytest.raises(ChordInputError, match="unknown peer"):
        make_peer("marlin=/x")


def test_sweep_follows_benchmarks_md_and_humming_constraints():
    assert len(SWEEP) == 10
    assert {c.mma_type for c in SWEEP} == {"mma", "wgmma"}
    assert {c.block[0] for c in SWEEP} == {16, 32, 64}
    assert {c.block[2] for c in SWEEP} == {64, 128}
    assert {c.num_stages for c in SWEEP} == {4}
    for c in SWEEP:
        bm, bn, bk = c.block
        wm, wn, wk = c.warp
        warps = (bm * bn * bk) // (wm * wn * wk)
        assert warps & (warps - 1) == 0 and 4 <= warps <= 8
        assert wn == 64 and bm % wm == 0 and bn % wn == 0 and bk % wk == 0
        if c.mma_type == "wgmma":
            assert (bn // wn) % 4 == 0 and wk <= 64  # wgmma tiling and its 128-byte swizzle
    # Every configuration fits every indexed shape, so each GEMM sweeps all 10.
    for s in S.select(["indexed"]):
        for g in s.gemms:
            assert all(c.fits(g.n, g.k) for c in SWEEP), (s.id, g)
    assert len({c.label for c in SWEEP}) == 10


def test_cli_list_needs_no_gpu(capsys):
    assert main(["--list", "--scenarios", "tp8"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out] == ["tp8_decode160", "tp8_1024", "tp8_8192"]


def test_cli_rejects_bad_input(capsys):
    assert main(["--list", "--scenarios", "nope"]) == 2
    assert main(["--draws", "zipf", "--list"]) == 2
    assert main(["--impls", "cutlass"]) == 2
    assert main(["--peer", "humming"]) == 2
    assert "error:" in capsys.readouterr().err


def test_cli_defaults():
    args = parse_args(["--quick", "--peer", "humming=/x", "--out", "o"])
    assert args.quick and args.peer == ["humming=/x"] and str(args.out) == "o"
    assert args.impls == "reference,bf16-ceiling,chord-indexed"


def test_triton_copy_kernel_copies_exactly_in_the_interpreter(tmp_path):
    """The SM copy kernel that defines the copy ceiling, run by Triton's CPU interpreter."""
    pytest.importorskip("triton")
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "triton_copy_check.py"
    script.write_text(
        "import torch\n"
        "from chord_bench.ceilings import COPY_BLOCK, copy_methods\n"
        "src = torch.randn(2 * COPY_BLOCK + 77).to(torch.bfloat16)\n"
        "for name, fn in copy_methods(src, dst := torch.zeros_like(src)).items():\n"
        "    dst.zero_(); fn(); assert torch.equal(src, dst), name\n"
        "print('ok')\n"
    )
    src_dir = Path(__file__).resolve().parents[1] / "src"
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join([str(src_dir), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
