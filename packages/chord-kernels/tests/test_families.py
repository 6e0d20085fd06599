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


@pytest.mark.parametrize("arch", SUPPORTED_ARCHS)
def test_precompile_builds_every_kernel_a_kimi_layer_loads(arch: str) -> None:
    """What ``chord-kernels precompile`` builds covers what ``indexed.prepare_layer`` loads for Kimi's
    EP8 and TP8 layers (standard and masked, both scale forms, the routing): a serving host without
    nvcc then finds every kernel in the cache (docs/vllm.md)."""
    import dataclasses

    from chord_kernels.indexed import PROFILES, api
    from chord_kernels.indexed.layout import PROFILE_ARCHS
    from chord_kernels.ops import align
    from chord_kernels.packed import PackedWeight

    built = {k.source for family in FAMILIES for k in importlib.import_module(family.kernels).kernels(arch)}
    profiles = [p for p in PROFILES if arch in PROFILE_ARCHS[p]]
    assert profiles
    for profile in profiles:
        for small_scales in (False, True):
            w13, w2 = (PackedWeight(layout="indexed", family="indexed", mode="indexed", profile=profile,
                                    layout_version=2, num_experts=48, n=n, k=k, group_size=32, tensors={},
                                    small_scales=small_scales) for n, k in ((4096, 7168), (7168, 2048)))
            tp8 = [dataclasses.replace(w, n=n, k=k) for w, (n, k) in zip((w13, w2), ((512, 7168), (7168, 256)),
                                                                          strict=True)]
            for up, down in ((w13, w2), tp8):
                for masked in (False, True):
                    loaded = [*api.layer_kernels(up, down, arch, masked=masked), *align.kernels(arch)]
                    assert not [k.name for k in loaded if k.source not in built], (profile, small_scales, masked)
