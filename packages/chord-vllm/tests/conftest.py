"""GPU tests carry ``@pytest.mark.gpu`` and skip cleanly where CUDA is absent (CI).

Modules that test the plugin inside vLLM start with ``vllm_support.require_vllm()``: they skip,
with the reason, where vLLM 0.33 is not installed (``nox -s tests``), and fail under
``CHORD_REQUIRE_VLLM=1`` (``nox -s vllm``). Without a GPU, vLLM is told it runs on CPU.
"""

from __future__ import annotations

import os

import pytest
import torch

from chord_kernels.testing import skip_gpu_tests_without_cuda

if not torch.cuda.is_available():
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_gpu_tests_without_cuda(items)
