"""The family list: every family has a precompile hook, layouts register from it, names are checked."""

from __future__ import annotations

import importlib

import pytest

from chord_kernels import ChordInputError
from chord_kernels.families import FAMILIES, load_layouts, precompile
from chord_kernels.jit import SUPPORTED_ARCHS, CudaKernel
from chord_kernels.packed import available_layouts


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_every_family_lists_its_kernels(family) -> None:
    hook = importlib.import_module(family.kernels).kernels
    for arch in SUPPORTED_ARCHS:
        kernels = hook(arch)
        assert kernels and all(isinstance(k, CudaKernel) for k in kernels)
        assert len({k.source for k in kernels}) == len(kernels)


def test_layouts_come_from_the_family_list() -> None:
    assert len({f.name for f in FAMILIES}) == len(FAMILIES)
    load_layouts()
    layouts = available_layouts()
    assert {"reference", "indexed"} <= set(layouts)
    for family in FAMILIES:
        if family.layout:
            assert any(layout.family == family.name for layout in layouts.values())


def test_unknown_family_is_named() -> None:
    with pytest.raises(ChordInputError, match=r"unknown \['grouped-v9'\]; registered: \['activation', 'dequant', 'grouped', 'indexed', 'routing', 'topk'\]"):
        precompile(("sm_90a",), ["grouped-v9"])
