"""GPU tests carry ``@pytest.mark.gpu`` and skip cleanly where CUDA is absent (CI)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

# Rank bodies live in tests/_workers.py and tests/_gpu_workers.py; make them importable here and
# in the spawned ranks whatever pytest's import mode is.
sys.path.insert(0, str(Path(__file__).resolve().parent))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
