"""Repository-wide promises a user relies on: a license in every package, docs that stand alone."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = sorted(p.parent for p in (ROOT / "packages").glob("*/pyproject.toml")) if (ROOT / "packages").is_dir() else []
tomllib = pytest.importorskip("tomllib")  # Python 3.11+
pytestmark = pytest.mark.skipif(not (ROOT / "noxfile.py").is_file(), reason="not run from a Chord checkout")

# Design notes that live outside this repository: nothing shipped may send a reader there.
OUTSIDE = re.compile(r"DESIGN\.md|BENCHMARKS\.md|KERNEL-NOTES\.md|VLLM-0\.33\.md|STYLE\.md|\.\./shared")


def test_every_package_ships_the_license_it_declares() -> None:
    assert (ROOT / "LICENSE").read_text().startswith("Copyright")
    assert "Apache License" in (ROOT / "LICENSE").read_text()
    assert len(PACKAGES) >= 5
    for package in PACKAGES:
        project = tomllib.loads((package / "pyproject.toml").read_text())["project"]
        assert project["license"] == "Apache-2.0", package.name
        assert project["license-files"] == ["LICENSE"], package.name
        assert (package / "LICENSE").read_text() == (ROOT / "LICENSE").read_text(), package.name


def test_docs_and_sources_stand_on_their_own() -> None:
    shipped = [*ROOT.glob("docs/**/*.md"), ROOT / "README.md", *ROOT.glob("ci/*.py")]
    for package in PACKAGES:
        shipped += [package / "README.md", *package.glob("src/**/*.py"), *package.glob("src/**/*.cuh")]
    offenders = [str(p.relative_to(ROOT)) for p in shipped if p.is_file() and OUTSIDE.search(p.read_text())]
    assert not offenders, f"files that point readers at notes outside the repository: {offenders}"


def test_every_package_says_its_version_and_ships_its_types() -> None:
    for package in PACKAGES:
        project = tomllib.loads((package / "pyproject.toml").read_text())
        (module,) = [p for p in (package / "src").iterdir() if p.is_dir() and (p / "__init__.py").is_file()]
        sources = [module / "__init__.py", module / "version.py"]
        said = {m for p in sources if p.is_file()
                for m in re.findall(r'^__version__ = "([^"]+)"', p.read_text(), re.M)}
        assert said == {project["project"]["version"]}, package.name
        assert (module / "py.typed").is_file(), package.name
        data = project.get("tool", {}).get("setuptools", {}).get("package-data", {})
        assert "py.typed" in " ".join(data.get(module.name, [])), package.name
