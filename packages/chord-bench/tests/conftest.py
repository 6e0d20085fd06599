"""GPU tests carry ``@pytest.mark.gpu`` and skip cleanly where CUDA is absent (CI)."""

from __future__ import annotations

import pytest

from chord_kernels.testing import skip_gpu_tests_without_cuda


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_gpu_tests_without_cuda(items)
