"""Packed-weight objects: metadata, round trips, and refusing the wrong kernel."""

from __future__ import annotations

import re

import pytest
import torch

from chord_kernels import (
    ChordLayoutError,
    ChordUnsupportedError,
    PackedWeight,
    __version__,
    pack,
    unpack,
)
from chord_kernels.formats import random_quantized
from chord_kernels.packed import get_layout


def test_reference_layout_round_trip_and_state_dict() -> None:
    packed, scales = random_quantized(3, 16, 64, generator=torch.Generator().manual_seed(0))
    pw = pack("reference", packed, scales, "any")
    assert (pw.num_experts, pw.n, pw.k, pw.group_size) == (3, 16, 64, 32)
    back = unpack(pw)
    assert torch.equal(back[0], packed) and torch.equal(back[1], scales)
    meta = pw.metadata()
    assert all(isinstance(v, str) for v in meta.values()) and meta["chord.layout"] == "reference"
    again = PackedWeight.from_state_dict(meta, pw.state_dict("w13."), prefix="w13.")
    assert again.describe() == pw.describe()
    assert torch.equal(again.tensors["weight_packed"], packed)


def test_single_expert_is_stacked() -> None:
    packed, scales = random_quantized(16, 64)
    assert pack("reference", packed, scales, "any").num_experts == 1


def test_require_refuses_a_mismatch_loudly() -> None:
    pw = pack("reference", *random_quantized(1, 8, 32), "any")
    pw.require(family="reference")
    with pytest.raises(ChordLayoutError, match=r"needs a weight packed with mode in \['masked'\]"):
        pw.require(family="reference", mode="masked", what="the masked decode kernel")


def test_unknown_layout_and_profile() -> None:
    with pytest.raises(ChordUnsupportedError, match=f"not yet supported by chord-kernels {re.escape(__version__)}"):
        get_layout("masked-v9")
    with pytest.raises(ChordUnsupportedError, match="no profile 'h999'"):
        pack("reference", *random_quantized(1, 8, 32), "h999")


def test_metadata_missing_field_is_named() -> None:
    pw = pack("reference", *random_quantized(1, 8, 32), "any")
    meta = pw.metadata()
    del meta["chord.profile"]
    with pytest.raises(ValueError, match=r"lacks chord\.profile"):
        PackedWeight.from_state_dict(meta, pw.state_dict())


@pytest.mark.parametrize("mode", ["contiguous", "masked"])
def test_grouped_layouts_are_the_indexed_tiles_under_their_own_record(mode: str) -> None:
    packed, scales = random_quantized(3, 72, 160, generator=torch.Generator().manual_seed(1))
    weight = pack(mode, packed, scales, profile="h200_ep8")
    indexed_w = pack("indexed", packed, scales, profile="h200_ep8")
    assert (weight.family, weight.mode, weight.layout) == ("grouped", mode, mode)
    assert torch.equal(weight.tensors["tiles"], indexed_w.tensors["tiles"])
    back = unpack(weight)
    assert torch.equal(back[0], packed) and torch.equal(back[1], scales)
    other = "masked" if mode == "contiguous" else "contiguous"
    with pytest.raises(ChordLayoutError, match=rf"mode in \['{other}'\]"):
        weight.require(family="grouped", mode=other, what="x")


def test_unpack_refuses_what_is_not_a_packed_weight():
    packed, scales = random_quantized(2, 32, 64)
    with pytest.raises(ChordLayoutError, match="weight: expected a PackedWeight .* got tuple"):
        unpack((packed, scales))


def test_reference_unpack_checks_its_tensors_against_the_record():
    from chord_kernels import ChordInputError

    weight = pack("reference", *random_quantized(2, 32, 64), profile="any")
    with pytest.raises(ChordInputError, match=r"expected tensor 'weight_packed' torch.int32 \[2, 3, 8\], got"):
        unpack(PackedWeight(**{**weight.__dict__, "n": 3}))  # once returned N=32 tensors for an N=3 record
    with pytest.raises(ChordInputError, match="expected tensor 'weight_packed' .* got None"):
        unpack(PackedWeight(**{**weight.__dict__, "tensors": {}}))


def test_from_state_dict_refuses_malformed_metadata_values():
    from chord_kernels import ChordInputError

    weight = pack("indexed", *random_quantized(2, 32, 64), profile="h200_ep8")
    for key, value in (("chord.n", "x"), ("chord.options", "{")):
        with pytest.raises(ChordInputError, match="packed-weight metadata: expected integer fields and JSON options"):
            PackedWeight.from_state_dict({**weight.metadata(), key: value}, weight.state_dict())
    with pytest.raises(ChordInputError, match="holds no tensors"):
        _ = PackedWeight(**{**weight.__dict__, "tensors": {}}).device


@pytest.mark.parametrize("layout", ["indexed", "contiguous", "masked"])
def test_tile_layouts_refuse_no_experts_or_no_channels(layout):
    from chord_kernels import ChordInputError

    packed, scales = random_quantized(2, 32, 64)
    for p, s in ((packed[:0], scales[:0]), (packed[:, :0], scales[:, :0])):
        with pytest.raises(ChordInputError, match="expected at least one expert and one output channel"):
            pack(layout, p, s, profile="h200_ep8")
