"""Each rank's tiles cut from a chord-pack tensor of every expert equal packing that rank's slice
of the source weights (whole-tile cuts and the repacking path), without vLLM."""

from __future__ import annotations

import logging

import pytest
import torch
from source_slices import tp_w2, tp_w13

import chord_kernels
from chord_kernels.formats import random_quantized
from chord_vllm import _compat, packed_ckpt


def _spec(pw: chord_kernels.PackedWeight) -> packed_ckpt.Projection:
    return packed_ckpt.Projection(pw.num_experts, pw.n, pw.k, pw.profile, dict(pw.options))


@pytest.mark.parametrize(("proj", "n", "k", "tp", "whole_tiles"), [
    ("w13", 512, 256, 2, True),    # 128 gate + 128 up rows per rank: whole 64-row blocks
    ("w13", 384, 320, 2, False),   # 96 per rank: cuts a block, repacked
    ("w13", 1024, 96, 4, True),    # K = 96: edge tiles along K, blocks still whole
    ("w2", 192, 1024, 4, True),    # 256 K per rank: whole K tiles
    ("w2", 200, 512, 2, False),    # N = 200: edge block along N, repacked
    ("w2", 128, 384, 2, False),    # 192 K per rank: cuts a K tile, repacked
])
def test_rank_slice_equals_packing_the_sliced_source(proj, n, k, tp, whole_tiles) -> None:
    g = torch.Generator().manual_seed(n + k)
    packed, scales = random_quantized(6, n, k, generator=g)
    whole = chord_kernels.pack("indexed", packed, scales, profile="h200_ep8")
    spec = _spec(whole)
    local = [5, 1, 3]  # round-robin-like placement: local order is not global order
    cut_fast = packed_ckpt._tile_slice(whole.tensors["tiles"][local], proj, spec, 0, (n // 2 if proj == "w13" else k) // tp)
    assert (cut_fast is not None) is whole_tiles
    for rank in range(tp):
        got = packed_ckpt.rank_slice(whole.tensors["tiles"], proj, spec, local_experts=local, tp_rank=rank, tp_size=tp)
        want = chord_kernels.pack("indexed", *(tp_w13 if proj == "w13" else tp_w2)(packed[local], scales[local], rank, tp), profile="h200_ep8")
        assert torch.equal(got, want.tensors["tiles"]), rank


def test_rank_slice_refuses_a_tensor_of_another_shape() -> None:
    whole = chord_kernels.pack("indexed", *random_quantized(2, 64, 64), profile="h200_tp8")
    with pytest.raises(ValueError, match=r"chord w2 tiles: expected int32 \[3, 8, 72\] for \[3, 64, 64\] weights, got"):
        packed_ckpt.rank_slice(whole.tensors["tiles"], "w2", packed_ckpt.Projection(3, 64, 64, "h200_tp8", {}),
                               local_experts=[0, 1, 2], tp_rank=0, tp_size=1)


def test_expert_slices_orders_by_local_id() -> None:
    assert packed_ckpt.expert_slices(6, [-1, 1, -1, 0, -1, 2]) == [3, 1, 5]
    with pytest.raises(ValueError, match="are not 0..1"):
        packed_ckpt.expert_slices(4, [0, -1, 2, -1])


def _block(**changes) -> dict:
    pw = chord_kernels.pack("indexed", *random_quantized(2, 64, 64), profile="h200_ep8")
    meta = {**pw.metadata(), "chord.num_experts": "2"}
    block = {"schema_version": 1, "format": "chord-packed", "layout": "indexed",
             "layout_version": pw.layout_version, "projections": {"w13": {"packed_weight": meta}, "w2": {"packed_weight": meta}}}
    block.update(changes)
    return block


def test_read_block_takes_chord_pack_output_and_refuses_the_rest() -> None:
    got = packed_ckpt.read_block(_block(), "x/config.json")
    assert got["w13"] == packed_ckpt.Projection(2, 64, 64, "h200_ep8", got["w13"].options) and got["w13"].options
    with pytest.raises(ValueError, match="x/config.json: chord_pack layout_version is 7; this chord-vllm serves 2"):
        packed_ckpt.read_block(_block(layout_version=7), "x/config.json")
    odd = _block()
    odd["projections"]["w13"]["packed_weight"]["chord.profile"] = "mi300_ep8"
    with pytest.raises(ValueError, match=r"packed for profile 'mi300_ep8'; this chord-vllm serves \['b200_ep8'"):
        packed_ckpt.read_block(odd, "x/config.json")
    with pytest.raises(ValueError, match="must be a JSON object"):
        packed_ckpt.read_block(["not", "a", "dict"], "x/config.json")
    broken = _block()
    broken["projections"]["w2"] = {"packed_weight": {"chord.layout": "indexed"}}
    with pytest.raises(ValueError, match="projections.w2.packed_weight is incomplete"):
        packed_ckpt.read_block(broken, "x/config.json")


def test_rank_slice_of_an_expert_range() -> None:
    """A rank's experts within a range tensor (global ids 6..11), cut for TP2, equal packing its
    slice of those experts' source weights."""
    g = torch.Generator().manual_seed(3)
    packed, scales = random_quantized(6, 512, 256, generator=g)  # the range's experts 6..11
    part = chord_kernels.pack("indexed", packed, scales, profile="h200_ep8")
    spec = packed_ckpt.Projection(24, 512, 256, "h200_ep8", dict(part.options))
    for rank in range(2):
        got = packed_ckpt.rank_slice(part.tensors["tiles"], "w13", spec, experts=range(6, 12),
                                     local_experts=[8, 9, 10, 11], tp_rank=rank, tp_size=2)
        want = chord_kernels.pack("indexed", *tp_w13(packed[2:], scales[2:], rank, 2), profile="h200_ep8")
        assert torch.equal(got, want.tensors["tiles"]), rank
    with pytest.raises(ValueError, match=r"chord w13 tiles \(experts 6-12\): expected int32 \[7, "):
        packed_ckpt.check_tiles(part.tensors["tiles"], "w13", spec, range(6, 13))


@pytest.mark.parametrize("layout", packed_ckpt.TILE_LAYOUTS)
def test_served_layouts_are_the_indexed_tiles(layout: str) -> None:
    packed, scales = random_quantized(3, 128, 256, generator=torch.Generator().manual_seed(5))
    got = chord_kernels.pack(layout, packed, scales, profile="h200_ep8")
    want = chord_kernels.pack("indexed", packed, scales, profile="h200_tp8")
    assert got.layout_version == want.layout_version == packed_ckpt.indexed_layout_version()
    assert got.options == want.options and torch.equal(got.tensors["tiles"], want.tensors["tiles"])


def test_read_block_takes_expert_ranges_and_refuses_bad_ones() -> None:
    meta = {**_block()["projections"]["w13"]["packed_weight"], "chord.layout": "masked",
            "chord.family": "grouped", "chord.mode": "masked"}
    block = _block(schema_version=2, layout="masked", expert_ranges=[[0, 0], [1, 1]],
                   projections={"w13": {"packed_weight": meta}, "w2": {"packed_weight": meta}})
    got = packed_ckpt.read_block(block, "x/config.json")
    assert got["w2"].ranges == (range(0, 1), range(1, 2)) and got["w2"].layout == "masked"
    assert packed_ckpt.param_name("w2", range(1, 2)) == "chord_w2_experts_1_1_tiles"
    for bad in ([[0, 1], [1, 1]], [[1, 1], [0, 0]], [[0, 0]], [[0, 0], [1, 2]], [[0, -1], [0, 1]], "0-1", None):
        with pytest.raises(ValueError, match=r"expert_ranges .* do not cover experts 0..1 in order, each once"):
            packed_ckpt.read_block({**block, "expert_ranges": bad}, "x/config.json")
    with pytest.raises(ValueError, match="projections.w13 layout is 'masked'; this chord-vllm serves 'indexed'"):
        packed_ckpt.read_block({**block, "layout": "indexed"}, "x/config.json")


def test_the_repacking_path_is_logged_once_and_the_tile_cut_is_not() -> None:
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = records.append
    level = _compat.logger.level
    _compat.logger.addHandler(handler)
    _compat.logger.setLevel(logging.INFO)
    _compat._logged.clear()
    whole = chord_kernels.pack("indexed", *random_quantized(2, 128, 512), profile="h200_tp8")
    spec = _spec(whole)
    try:
        for tp in (2, 4, 4):  # w2's K per rank: 256 is one whole tile, 128 cuts one (Kimi at TP16)
            for rank in range(tp):
                packed_ckpt.rank_slice(whole.tensors["tiles"], "w2", spec, local_experts=[0, 1], tp_rank=rank, tp_size=tp)
    finally:
        _compat.logger.removeHandler(handler)
        _compat.logger.setLevel(level)
    assert [r.getMessage() for r in records] == [
        "Chord: chord w2 tiles do not split into whole tiles at TP=4 (128 of 512 channels per rank); loading "
        "unpacks, slices and repacks them, much slower than cutting tiles (the source checkpoint packs on the "
        "GPU instead)"]
