"""chord-pack works with nothing but what it declares: a clean install, without the test extras.

The test builds that environment from this one: a directory of links to exactly the packages in
chord-pack's declared dependency closure (markers evaluated, extras left out), and runs the demo
and a convert + verify under ``python -S`` (no site-packages) with only that directory and the two
packages' sources on the path. An undeclared need (numpy was one) fails there with its ImportError.
``nox -s install-check`` does the same from built wheels in a fresh venv.
"""

from __future__ import annotations

import importlib.metadata as md
import subprocess
import sys
from pathlib import Path

import pytest

packaging = pytest.importorskip("packaging")
from packaging.requirements import Requirement  # noqa: E402
from packaging.utils import canonicalize_name  # noqa: E402

import chord_kernels  # noqa: E402
import chord_pack  # noqa: E402

OWN = {"chord-pack", "chord-kernels"}

SCRIPT = r"""
import sys
from pathlib import Path

from typer.testing import CliRunner

from chord_pack.cli import app

work = Path(sys.argv[1])
runner = CliRunner()
for args in (["demo", str(work / "demo")],
             ["convert", str(work / "demo" / "tiny-kimi-k2-thinking"), "--layout", "reference",
              "--output", str(work / "converted")],
             ["verify", str(work / "converted")]):
    res = runner.invoke(app, args)
    print(res.output)
    if res.exit_code != 0:
        raise SystemExit(f"chord-pack {args[0]} failed ({res.exit_code}): {res.exception!r}")
print("clean install ok")
"""


def declared_closure(root: str = "chord-pack") -> set[str]:
    """Canonical names of ``root`` and everything it needs, transitively, without extras."""
    seen: set[str] = set()
    todo = [root]
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        for raw in md.requires(name) or []:
            req = Requirement(raw)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return seen


def clean_site(target: Path) -> Path:
    """A directory linking the top-level files of every declared dependency (not chord's own)."""
    target.mkdir()
    for name in sorted(declared_closure() - OWN):
        dist = md.distribution(name)
        for top in sorted({f.parts[0] for f in dist.files or [] if f.parts and f.parts[0] != ".."}):
            source = Path(dist.locate_file(top))
            if source.exists() and not (target / top).exists():
                (target / top).symlink_to(source)
    return target


def test_demo_convert_verify_need_only_declared_dependencies(tmp_path: Path) -> None:
    assert "numpy" in declared_closure(), "chord-pack writes tensors through numpy: it must declare it"
    site = clean_site(tmp_path / "site")
    sources = [Path(m.__file__).parents[1] for m in (chord_pack, chord_kernels)]
    path_setup = f"import sys; sys.path[:0] = {[str(p) for p in (site, *sources)]!r}\n"
    proc = subprocess.run(
        [sys.executable, "-S", "-c", path_setup + SCRIPT, str(tmp_path / "work")],
        capture_output=True, text=True, timeout=300, env={"COLUMNS": "80", "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "clean install ok" in proc.stdout
    assert "NumPy" not in proc.stderr, proc.stderr[-2000:]  # torch warns when numpy is missing
