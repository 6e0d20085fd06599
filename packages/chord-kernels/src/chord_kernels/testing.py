"""Test helpers shared by the Chord packages (and usable by downstream test suites)."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
import torch


def skip_gpu_tests_without_cuda(items: Iterable[pytest.Item]) -> None:
    """Mark every ``@pytest.mark.gpu`` test as skipped when no CUDA GPU is visible (CI has none).

    Call it from a conftest's ``pytest_collection_modifyitems`` hook.
    """
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
