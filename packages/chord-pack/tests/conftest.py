"""Shared fixtures. GPU tests carry ``@pytest.mark.gpu`` and skip without CUDA (CI has none).

``layout`` runs a test once per layout: a test-only permutation layout registered here (it mixes
experts, so the converter must pack whole projections) and chord-kernels' ``indexed``,
``contiguous`` and ``masked`` layouts (packed expert chunk by expert chunk; the grouped ones
written in expert ranges).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from chord_kernels.formats import GROUP_SIZE
from chord_kernels.packed import PackedWeight, register_layout
from chord_kernels.testing import skip_gpu_tests_without_cuda
from chord_pack.demo import write_tiny_kimi_checkpoint

try:
    import huggingface_hub  # noqa: F401
    HAVE_HUB = True
except ImportError:
    HAVE_HUB = False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not HAVE_HUB:  # e.g. a bare GPU host
        skip_all = pytest.mark.skip(reason="chord-pack needs huggingface_hub (a declared dependency)")
        for item in items:
            item.add_marker(skip_all)
    skip_gpu_tests_without_cuda(items)


class ReversedExpertsLayout:
    """Test-only reversible layout: experts in reverse order, K words rotated by one, scales [E, K/32, N].

    Reversing experts makes chunked packing differ from whole packing, so it exercises the
    converter's whole-projection path; the other changes make a skipped permutation visible.
    """

    name = "test-reversed"
    family = "reference"
    mode = "reference"
    version = 3
    profiles = ("test_a", "test_b")

    def pack(self, packed: torch.Tensor, scales: torch.Tensor, profile: str, **options) -> PackedWeight:
        e, n, kw = packed.shape
        return PackedWeight(
            layout=self.name, family=self.family, mode=self.mode, profile=profile,
            layout_version=self.version, num_experts=e, n=n, k=kw * 8, group_size=GROUP_SIZE,
            tensors={"codes": torch.roll(packed.flip(0), 1, dims=2).contiguous(),
                     "scales_t": scales.flip(0).transpose(1, 2).contiguous()},
            options=dict(options),
        )

    def unpack(self, weight: PackedWeight) -> tuple[torch.Tensor, torch.Tensor]:
        weight.require(family=self.family, layout_version=self.version, what="test-reversed unpack")
        packed = torch.roll(weight.tensors["codes"], -1, dims=2).flip(0).contiguous()
        scales = weight.tensors["scales_t"].transpose(1, 2).flip(0).contiguous()
        return packed, scales


TEST_LAYOUT = register_layout(ReversedExpertsLayout())


class NeedsDataLayout(ReversedExpertsLayout):
    """Like test-reversed, but refuses the meta device (as a layout reading values would)."""

    name = "test-needs-data"

    def pack(self, packed: torch.Tensor, scales: torch.Tensor, profile: str, **options) -> PackedWeight:
        if packed.device.type == "meta":
            raise RuntimeError("this layout inspects values")
        return super().pack(packed, scales, profile, **options)


NEEDS_DATA_LAYOUT = register_layout(NeedsDataLayout())


def _layouts() -> list[tuple[str, str]]:
    return [("test-reversed", "test_b"), ("indexed", "h200_ep8"), ("contiguous", "h200_ep8"), ("masked", "h200_tp8")]


LAYOUTS = _layouts()


@pytest.fixture(params=LAYOUTS, ids=[name for name, _ in LAYOUTS])
def layout(request) -> tuple[str, str]:
    """(layout name, profile)."""
    return request.param


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    """A fresh tiny K2-Thinking-style checkpoint (2 MoE layers x 4 experts)."""
    return write_tiny_kimi_checkpoint(tmp_path / "src", "k2-thinking", seed=7)


@pytest.fixture
def isolated_hf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty HF cache and no ambient Hub settings; returns the cache directory."""
    from huggingface_hub import constants

    cache = tmp_path / "hf-cache"
    for var in ("HF_ENDPOINT", "HF_TOKEN", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)  # the fake Hub speaks HTTP/LFS only
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True, raising=False)
    return cache
