"""Chord's MoE layers in vLLM 0.33 on CPU: parameters, loading a tiny Kimi checkpoint (source and
chord-packed) as simulated TP and EP ranks, packing after loading, and ``FusedMoEKernel.apply``
through vLLM's real prepare/finalize against ``chord_kernels.reference.moe_layer``.

The device checks are told this is an H200 and the experts run Chord's reference GEMMs (there is no
GPU here); the GPU tests of :mod:`chord_vllm.core` cover the kernels.
"""

from __future__ import annotations

import vllm_support as vs

vs.require_vllm()  # skips this module without vLLM 0.33 (fails under CHORD_REQUIRE_VLLM=1)

import logging  # noqa: E402
import re  # noqa: E402
from pathlib import Path  # noqa: E402
from types import SimpleNamespace  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from safetensors.torch import safe_open  # noqa: E402
from vllm import forward_context  # noqa: E402
from vllm.model_executor.layers.fused_moe import modular_kernel as mk  # noqa: E402
from vllm.model_executor.layers.fused_moe.prepare_finalize.batched import (  # noqa: E402
    BatchedPrepareAndFinalize,
)
from vllm.model_executor.model_loader import weight_utils  # noqa: E402

import chord_kernels  # noqa: E402
import chord_vllm  # noqa: E402
from chord_kernels import reference  # noqa: E402
from chord_kernels.formats import random_quantized  # noqa: E402
from chord_pack.convert import convert  # noqa: E402
from chord_pack.demo import kimi_config, kimi_tensors, write_checkpoint  # noqa: E402
from chord_vllm import _compat, core, decision, ep_filter, experts, method, packed_ckpt  # noqa: E402
from chord_vllm.method import ChordWNA16MoEMethod  # noqa: E402

# I = 512 so that TP2 ranks (256 each) cut whole tiles; I = 192 below exercises the repacking path.
DIMS = {"layers": 1, "experts": 8, "hidden": 256, "intermediate": 512}
E, H, INTER = DIMS["experts"], DIMS["hidden"], DIMS["intermediate"]
RANKS = [("TP1", {}), ("TP2 rank 0", dict(tp=2, tp_rank=0)), ("TP2 rank 1", dict(tp=2, tp_rank=1)),
         ("EP2 rank 0", dict(ep=2, ep_rank=0)), ("EP2 rank 1", dict(ep=2, ep_rank=1)),
         ("EP2 rank 1 round-robin", dict(ep=2, ep_rank=1, placement="round_robin"))]


@pytest.fixture(autouse=True)
def chord_on_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHORD_VLLM", raising=False)
    chord_vllm.register()
    monkeypatch.setattr(_compat, "device_arch", lambda: ("sm_90a", ""))
    monkeypatch.setattr(_compat, "nvcc_problem", lambda: None)
    monkeypatch.setattr(experts, "kernel_backend", lambda: core.REFERENCE)


def _write(root: Path, dims: dict) -> dict:
    src = write_checkpoint(root / "src", kimi_config("k2-thinking", **dims), kimi_tensors("k2-thinking", **dims))
    convert(src, root / "packed", "indexed", "h200_ep8", max_shard_bytes=1_000_000,
            experts_per_tensor=dims["experts"])  # schema 1: one tensor of all experts (ranges: below)
    return {"src": src, "packed": root / "packed", "tensors": vs.read_tensors(src),
            "packed_tensors": vs.read_tensors(root / "packed")}


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return _write(tmp_path_factory.mktemp("kimi"), DIMS)


def _rank_source(tensors, **rank):
    """The source weights rank ``rank`` should hold, cut by hand: its experts, then its TP slice."""
    layer = vs.build_layer(None, experts=E, hidden=H, intermediate=INTER, **rank)
    local = packed_ckpt.expert_slices(E, [layer._map_global_expert_id_to_local_expert_id(g) for g in range(E)])
    w13, w2 = vs.source_weights(tensors, 1, local)
    if rank.get("tp", 1) > 1:
        w13, w2 = vs.tp_slice(w13, w2, rank["tp_rank"], rank["tp"])
    return w13, w2, layer.expert_map


def _loaded(ckpt: dict, kind: str, **rank):
    _, config = vs.quant_config(ckpt[kind])
    layer = vs.build_layer(config, experts=E, hidden=H, intermediate=INTER, **rank)
    tensors = ckpt["tensors" if kind == "src" else "packed_tensors"]
    taken = vs.load_experts(layer, tensors, mapper=config.get_checkpoint_weight_mapper())
    return layer, taken


@pytest.mark.parametrize(("name", "rank"), RANKS, ids=[r[0] for r in RANKS])
def test_source_checkpoint_loads_packs_and_serves(ckpt, name, rank) -> None:
    layer, taken = _loaded(ckpt, "src", **rank)
    method = layer.quant_method
    assert isinstance(method, ChordWNA16MoEMethod) and method.packed is None
    w13, w2, expert_map = _rank_source(ckpt["tensors"], **rank)
    local = w13[0].shape[0]
    assert taken == local * 9  # 3 projections x (packed, scale, shape) per local expert
    # vLLM's loader put exactly the rank's slices into the compressed-tensors parameters.
    assert torch.equal(layer.w13_weight_packed.data, w13[0]) and torch.equal(layer.w13_weight_scale.data, w13[1])
    assert torch.equal(layer.w2_weight_packed.data, w2[0]) and torch.equal(layer.w2_weight_scale.data, w2[1])
    method.process_weights_after_loading(layer)
    names = {n for n, _ in layer.named_parameters()}
    assert names == {"chord_w13_tiles", "chord_w2_tiles"}  # the source tensors are freed
    want13 = chord_kernels.pack("indexed", *w13, profile=method.profile)
    assert torch.equal(layer.chord_w13_tiles.data, want13.tensors["tiles"])
    assert torch.equal(layer.w2_weight.data, chord_kernels.pack("indexed", *w2, profile=method.profile).tensors["tiles"])
    assert (method.w13.n, method.w13.k, method.w2.n, method.w2.k) == (w13[0].shape[1], H, H, w2[0].shape[2] * 8)
    assert all(torch.equal(a, b) for a, b in zip(chord_kernels.unpack(method.w13), w13, strict=True))
    assert method.w13.small_scales == want13.small_scales and method.w2.small_scales  # packed in chunks, then joined
    _check_apply(layer, w13, w2, expert_map)


@pytest.mark.parametrize(("name", "rank"), RANKS, ids=[r[0] for r in RANKS])
def test_chord_packed_checkpoint_loads_through_the_name_mapper(ckpt, name, rank) -> None:
    layer, taken = _loaded(ckpt, "packed", **rank)
    method = layer.quant_method
    assert isinstance(method, ChordWNA16MoEMethod) and method.packed is not None
    assert taken == 2 and {n for n, _ in layer.named_parameters()} == {"chord_w13_tiles", "chord_w2_tiles"}
    w13, w2, expert_map = _rank_source(ckpt["tensors"], **rank)
    method.process_weights_after_loading(layer)
    # Tiles cut from the stacked checkpoint equal packing the rank's slice of the source.
    assert torch.equal(layer.chord_w13_tiles.data, chord_kernels.pack("indexed", *w13, profile="h200_ep8").tensors["tiles"])
    assert torch.equal(layer.chord_w2_tiles.data, chord_kernels.pack("indexed", *w2, profile="h200_ep8").tensors["tiles"])
    assert method.w13.profile == method.profile  # relabelled for this deployment
    assert method.w13.small_scales and method.w2.small_scales  # read from the loaded tiles
    _check_apply(layer, w13, w2, expert_map)


def test_tp_slices_that_cut_tiles_are_repacked(tmp_path) -> None:
    dims = {**DIMS, "intermediate": 192}  # TP2: 96 channels per rank, not whole 64 x 256 tiles
    ck = _write(tmp_path, dims)
    for tp_rank in (0, 1):
        _, config = vs.quant_config(ck["packed"])
        layer = vs.build_layer(config, experts=E, hidden=H, intermediate=192, tp=2, tp_rank=tp_rank)
        vs.load_experts(layer, ck["packed_tensors"], mapper=config.get_checkpoint_weight_mapper())
        layer.quant_method.process_weights_after_loading(layer)
        w13, w2 = vs.tp_slice(*vs.source_weights(ck["tensors"], 1, list(range(E))), tp_rank, 2)
        assert torch.equal(layer.chord_w13_tiles.data, chord_kernels.pack("indexed", *w13, profile="h200_ep8").tensors["tiles"])
        assert torch.equal(layer.chord_w2_tiles.data, chord_kernels.pack("indexed", *w2, profile="h200_ep8").tensors["tiles"])


def test_chord_packed_tiles_of_the_wrong_shape_are_refused(ckpt) -> None:
    _, config = vs.quant_config(ckpt["packed"])
    layer = vs.build_layer(config, experts=E, hidden=H, intermediate=INTER)
    param = layer.chord_w13_tiles
    with pytest.raises(ValueError, match=r"chord w13 tiles: expected int32 \[8, .*for \[8, 1024, 256\] weights"):
        param.weight_loader(param, torch.zeros(7, 3, 72, dtype=torch.int32))


def _check_apply(layer, w13, w2, expert_map, ms=(1, 5, 33)) -> None:
    """``quant_method.apply`` (vLLM's FusedMoEKernel with the no-DP/EP prepare/finalize) equals the
    reference layer on the rank's own weights, bit for bit (EP ranks: their partial sums)."""
    for m in ms:
        ids, weights = vs.routing(m, E, 2, seed=m)
        x = vs.activations(m, H, seed=m)
        got = vs.apply(layer, x, weights, ids)
        want = reference.moe_layer(x, w13, w2, weights, ids, global_num_experts=E, expert_map=expert_map)
        assert got.shape == (m, H) and torch.equal(got, want), f"M={m}"


def test_apply_with_no_tokens(ckpt) -> None:
    layer, _ = _loaded(ckpt, "src")
    layer.quant_method.process_weights_after_loading(layer)
    ids, weights = vs.routing(0, E, 2)
    assert vs.apply(layer, vs.activations(0, H), weights, ids).shape == (0, H)


@pytest.fixture(scope="module")
def ep_layer(ckpt):
    """EP2 rank 1, loaded and packed once for the property test."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_compat, "device_arch", lambda: ("sm_90a", ""))
        mp.setattr(_compat, "nvcc_problem", lambda: None)
        mp.setattr(experts, "kernel_backend", lambda: core.REFERENCE)
        chord_vllm.register()
        layer, _ = _loaded(ckpt, "src", ep=2, ep_rank=1)
        layer.quant_method.process_weights_after_loading(layer)
    w13, w2, expert_map = _rank_source(ckpt["tensors"], ep=2, ep_rank=1)
    return layer, w13, w2, expert_map


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=st.integers(1, 40), top_k=st.integers(1, 4), hot=st.booleans(), int64=st.booleans(),
       seed=st.integers(0, 1 << 16))
def test_apply_fuzzed_routing_with_expert_map(ep_layer, m, top_k, hot, int64, seed) -> None:
    layer, w13, w2, expert_map = ep_layer
    ids, weights = vs.routing(m, E, top_k, seed=seed)
    if hot:  # every token's first choice is one remote expert: this rank sees only the others
        ids[:, 0] = 0
        ids[:, 1:] = torch.where(ids[:, 1:] == 0, 1, ids[:, 1:])
    if int64:  # DeepEP hands int64 ids
        ids = ids.long()
    x = vs.activations(m, H, seed=seed)
    got = vs.apply(layer, x, weights, ids)
    want = reference.moe_layer(x, w13, w2, weights, ids, global_num_experts=E, expert_map=expert_map)
    assert torch.equal(got, want)


@pytest.mark.parametrize(("kimi", "rank", "local"), [
    ("EP8", dict(ep=8, ep_rank=3), 48), ("TP8", dict(tp=8, tp_rank=5), 384)])
def test_create_weights_at_kimi_size(ckpt, kimi, rank, local) -> None:
    """vLLM 0.33's compressed-tensors parameters (N-first) at Kimi K2 size, on the meta device."""
    _, config = vs.quant_config(ckpt["src"])
    with torch.device("meta"):
        layer = vs.build_layer(config, experts=384, hidden=7168, intermediate=2048, top_k=8, **rank)
    i = 2048 // rank.get("tp", 1)
    got = {n: (tuple(p.shape), p.dtype) for n, p in layer.named_parameters()}
    assert got == {
        "w13_weight_packed": ((local, 2 * i, 896), torch.int32), "w2_weight_packed": ((local, 7168, i // 8), torch.int32),
        "w13_weight_scale": ((local, 2 * i, 224), torch.bfloat16), "w2_weight_scale": ((local, 7168, i // 32), torch.bfloat16),
        "w13_weight_shape": ((local, 2), torch.float32), "w2_weight_shape": ((local, 2), torch.float32),
    }
    assert layer.w13_weight_packed.is_transposed is False and layer.w13_weight_packed.quant_method == "group"


def _process_logged(layer, caplog) -> list[str]:
    """``process_weights_after_loading``, with the plugin's log lines it writes."""
    _compat.logger.addHandler(caplog.handler)
    _compat._logged.clear()
    try:
        with caplog.at_level("INFO", logger=_compat.logger.name):
            layer.quant_method.process_weights_after_loading(layer)
    finally:
        _compat.logger.removeHandler(caplog.handler)
    return [r.getMessage() for r in caplog.records]


def test_process_logs_which_layer_chord_serves(ckpt, caplog) -> None:
    layer, _ = _loaded(ckpt, "src")
    assert any("Chord serves the routed experts of model.layers.1.mlp.experts (8 local experts, profile "
               "h200_tp8, ChordIndexedExperts, chord reference (PyTorch))" in m for m in _process_logged(layer, caplog))


def test_which_layer_chord_serves_is_logged_once_per_process(ckpt) -> None:
    _, config = vs.quant_config(ckpt["src"])
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = records.append
    _compat.logger.addHandler(handler)
    level = _compat.logger.level
    _compat.logger.setLevel(logging.INFO)
    _compat._logged.clear()
    try:
        for number in (1, 2):  # Kimi has 60 MoE layers: one line, as the line itself says
            layer = vs.build_layer(config, layer=number, experts=E, hidden=H, intermediate=INTER)
            vs.load_experts(layer, {n.replace("layers.1.", f"layers.{number}."): t for n, t in ckpt["tensors"].items()})
            layer.quant_method.process_weights_after_loading(layer)
    finally:
        _compat.logger.removeHandler(handler)
        _compat.logger.setLevel(level)
    lines = [r.getMessage() for r in records if "Chord serves the routed experts" in r.getMessage()]
    assert len(lines) == 1 and "of model.layers.1.mlp.experts" in lines[0], lines


def test_process_logs_projections_without_small_scales(ckpt, caplog) -> None:
    layer, _ = _loaded(ckpt, "src")
    assert (layer.w13_weight_scale.data.abs() < 2.0 ** -5).all()
    layer.w2_weight_scale.data[0, 0, 0] = 0.25  # one group past 2^-5: the two-instruction form for w2
    logged = _process_logged(layer, caplog)
    assert layer.quant_method.w13.small_scales and not layer.quant_method.w2.small_scales
    assert any("model.layers.1.mlp.experts w2 has a scale of 2^-5 or more" in m for m in logged)
    assert not any("w13 has a scale" in m for m in logged)


# --- chord-pack checkpoints in expert ranges (schema 2) --------------------------------------

RANGED = [("indexed, 3 experts per tensor", "indexed", 3),  # EP2 rank 0 holds 0-3: range 3-5 straddles
          ("contiguous, default ranges", "contiguous", None),  # chord-pack's default: 1 expert per range for E = 8
          ("masked, 2 experts per tensor", "masked", 2)]


@pytest.fixture(scope="module")
def ranged(ckpt, tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("ranged")
    out = {}
    for name, layout, per_tensor in RANGED:
        path = root / layout
        convert(ckpt["src"], path, layout, "h200_ep8", max_shard_bytes=1_000_000, experts_per_tensor=per_tensor)
        out[name] = {"path": path, "tensors": vs.read_tensors(path)}
    return out


@pytest.fixture(autouse=True)
def vllm_skip_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM's own should_skip_weight and no recorded layers again after each test."""
    monkeypatch.setattr(weight_utils, "should_skip_weight", weight_utils.should_skip_weight)
    monkeypatch.setattr(ep_filter, "_local_experts", {})


def _ranged_layer(ranged: dict, which: str, **rank):
    _, config = vs.quant_config(ranged[which]["path"])
    layer = vs.build_layer(config, experts=E, hidden=H, intermediate=INTER, **rank)
    return layer, config.get_checkpoint_weight_mapper()


def _held(name: str) -> tuple[int, int]:
    """(first, last) expert of a range tensor's name."""
    first, last = re.search(r"\.experts_(\d+)_(\d+)\.", name).groups()
    return int(first), int(last)


@pytest.mark.parametrize(("name", "rank"), RANKS, ids=[r[0] for r in RANKS])
@pytest.mark.parametrize("which", [r[0] for r in RANGED])
def test_expert_range_checkpoint_loads_and_serves(ckpt, ranged, which, name, rank) -> None:
    layer, mapper = _ranged_layer(ranged, which, **rank)
    method = layer.quant_method
    spec = method.packed["w13"]
    assert spec.ranges is not None and spec.layout == which.split(",")[0]
    range_params = {n for n, p in layer.named_parameters() if p.numel() == 0}
    assert len(range_params) == 2 * len(spec.ranges)  # one (empty) parameter per range and projection
    taken = vs.load_experts(layer, ranged[which]["tensors"], mapper=mapper)
    assert taken == 2 * len(spec.ranges)  # every range reached a loader; other ranks' ones are no-ops
    method.process_weights_after_loading(layer)
    assert {n for n, _ in layer.named_parameters()} == {"chord_w13_tiles", "chord_w2_tiles"}
    w13, w2, expert_map = _rank_source(ckpt["tensors"], **rank)
    assert torch.equal(layer.chord_w13_tiles.data, chord_kernels.pack("indexed", *w13, profile="h200_ep8").tensors["tiles"])
    assert torch.equal(layer.chord_w2_tiles.data, chord_kernels.pack("indexed", *w2, profile="h200_ep8").tensors["tiles"])
    assert (method.w13.layout, method.w13.profile) == ("indexed", method.profile)  # relabelled
    _check_apply(layer, w13, w2, expert_map)


def _read_through_vllm(shards: list[Path], monkeypatch: pytest.MonkeyPatch) -> tuple[dict, list[str]]:
    """vLLM 0.33's safetensors iterator over ``shards``: what it yields, and every tensor it read."""
    read: list[str] = []

    class Recording:
        def __init__(self, path, framework):
            self._file = safe_open(path, framework=framework)

        def __enter__(self):
            self._inner = self._file.__enter__()
            return self

        def __exit__(self, *exc):
            return self._file.__exit__(*exc)

        def keys(self):
            return self._inner.keys()

        def get_tensor(self, name):
            read.append(name)
            return self._inner.get_tensor(name)

    monkeypatch.setattr(weight_utils, "safe_open", Recording)
    return dict(weight_utils.safetensors_weights_iterator([str(s) for s in shards], False)), read


EP_READS = [("EP2 rank 0", dict(ep=2, ep_rank=0), "indexed, 3 experts per tensor", {(0, 2), (3, 5)}),
            ("EP2 rank 1", dict(ep=2, ep_rank=1), "indexed, 3 experts per tensor", {(3, 5), (6, 7)}),
            ("EP2 rank 1 round-robin", dict(ep=2, ep_rank=1, placement="round_robin"),
             "contiguous, default ranges", {(1, 1), (3, 3), (5, 5), (7, 7)}),
            ("EP2 rank 0", dict(ep=2, ep_rank=0), "masked, 2 experts per tensor", {(0, 1), (2, 3)})]


@pytest.mark.parametrize(("name", "rank", "which", "want"), EP_READS, ids=[f"{r[0]}, {r[2]}" for r in EP_READS])
def test_an_ep_rank_reads_only_its_own_expert_ranges(ckpt, ranged, monkeypatch, name, rank, which, want) -> None:
    layer, mapper = _ranged_layer(ranged, which, **rank)
    shards = sorted(ranged[which]["path"].glob("*.safetensors"))
    yielded, read = _read_through_vllm(shards, monkeypatch)
    every = ranged[which]["tensors"]
    assert {_held(n) for n in read if ".chord." in n} == want  # the other rank's ranges were never read
    assert {n for n in read if ".chord." not in n} == {n for n in every if ".chord." not in n}
    assert {n for n in read if ".chord." in n} == {n for n in every if ".chord." in n and _held(n) in want}
    assert len(read) == len(set(read)) == len(yielded)
    vs.load_experts(layer, yielded, mapper=mapper)
    layer.quant_method.process_weights_after_loading(layer)
    w13, w2, expert_map = _rank_source(ckpt["tensors"], **rank)
    assert torch.equal(layer.chord_w13_tiles.data, chord_kernels.pack("indexed", *w13, profile="h200_ep8").tensors["tiles"])
    assert torch.equal(layer.chord_w2_tiles.data, chord_kernels.pack("indexed", *w2, profile="h200_ep8").tensors["tiles"])
    _check_apply(layer, w13, w2, expert_map, ms=(7,))


def test_without_ep_every_range_is_read(ranged, monkeypatch) -> None:
    which = "masked, 2 experts per tensor"
    _ranged_layer(ranged, which, tp=2, tp_rank=1)
    _, read = _read_through_vllm(sorted(ranged[which]["path"].glob("*.safetensors")), monkeypatch)
    assert sorted(read) == sorted(ranged[which]["tensors"])


def test_the_skip_rule_is_installed_once_and_leaves_other_names_to_vllm(ranged) -> None:
    original = weight_utils.should_skip_weight
    _ranged_layer(ranged, "masked, 2 experts per tensor", ep=2, ep_rank=1)
    wrapped = weight_utils.should_skip_weight
    assert wrapped is not original and wrapped.chord_wrapped is original
    _ranged_layer(ranged, "masked, 2 experts per tensor", ep=2, ep_rank=0)  # a second layer: same wrapper
    assert weight_utils.should_skip_weight is wrapped and ep_filter.install()
    assert wrapped("model.layers.1.mlp.experts.chord.w13.experts_4_5.tiles", None)  # rank 0 holds 0-3
    assert not wrapped("model.layers.1.mlp.experts.chord.w2.experts_2_3.tiles", None)
    assert not wrapped("model.layers.2.mlp.experts.chord.w2.experts_4_5.tiles", None)  # layer 2 not built
    assert not wrapped("model.layers.1.mlp.experts.chord.w13.tiles", None)  # schema 1: one tensor for all
    # vLLM's own rule for per-expert names, with and without --enable-ep-weight-filter
    assert wrapped("model.layers.1.mlp.experts.5.gate_proj.weight_packed", {0, 1})
    assert not wrapped("model.layers.1.mlp.experts.5.gate_proj.weight_packed", None)
    assert not wrapped("model.layers.1.self_attn.o_proj.weight", {0, 1})


def test_the_skip_rule_stays_off_on_another_vllm(ranged, monkeypatch) -> None:
    import vllm

    monkeypatch.setattr(vllm, "__version__", "0.34.0")
    original = weight_utils.should_skip_weight
    assert not ep_filter.install() and weight_utils.should_skip_weight is original
    monkeypatch.setattr(vllm, "__version__", "0.33.0")
    monkeypatch.setattr(weight_utils, "should_skip_weight", lambda name, ids, extra=None: False)
    assert not ep_filter.install()


def test_a_local_range_never_loaded_is_an_error(ranged) -> None:
    which = "indexed, 3 experts per tensor"
    layer, mapper = _ranged_layer(ranged, which, ep=2, ep_rank=1)
    tensors = {n: t for n, t in ranged[which]["tensors"].items() if "w2.experts_6_7." not in n}
    vs.load_experts(layer, tensors, mapper=mapper)
    with pytest.raises(ValueError, match=r"chord w2 tiles of local experts \[6, 7\] were never loaded"):
        layer.quant_method.process_weights_after_loading(layer)


@pytest.mark.parametrize("which", ["one tensor of all experts", "indexed, 3 experts per tensor"])
def test_a_layer_absent_from_the_checkpoint_is_an_error(ckpt, ranged, which) -> None:
    # vLLM checks no quantized model for unloaded parameters; the tiles would be torch.empty.
    path = ckpt["packed"] if which == "one tensor of all experts" else ranged[which]["path"]
    _, config = vs.quant_config(path)
    layer = vs.build_layer(config, experts=E, hidden=H, intermediate=INTER, ep=2, ep_rank=1)
    with pytest.raises(ValueError, match=r"chord w13 tiles of local experts \[4, 5, 6, 7\] were never loaded"):
        layer.quant_method.process_weights_after_loading(layer)


def test_dummy_weights_load_no_tiles_and_say_so(ckpt, caplog) -> None:
    _, config = vs.quant_config(ckpt["packed"])
    layer = vs.build_layer(config, experts=E, hidden=H, intermediate=INTER, load_format="dummy")
    assert any("--load-format dummy loads no chord tiles" in m for m in _process_logged(layer, caplog))

def test_a_range_tensor_of_the_wrong_shape_is_refused(ranged) -> None:
    layer, _ = _ranged_layer(ranged, "masked, 2 experts per tensor", ep=2, ep_rank=0)
    for name in ("chord_w13_experts_2_3_tiles", "chord_w13_experts_6_7_tiles"):  # local, and another rank's
        param = getattr(layer, name)
        with pytest.raises(ValueError, match=r"chord w13 tiles \(experts [26]-[37]\): expected int32 \[2, "):
            param.weight_loader(param, torch.zeros(3, 4, 72, dtype=torch.int32))


def test_grouped_layouts_are_logged_as_served_indexed(ranged, caplog) -> None:
    layer, mapper = _ranged_layer(ranged, "contiguous, default ranges", ep=2, ep_rank=0)
    vs.load_experts(layer, ranged["contiguous, default ranges"]["tensors"], mapper=mapper)
    assert any("packed as layout contiguous, profile h200_ep8 (8 expert ranges); this deployment serves it "
               "as layout indexed, profile h200_ep8 (same tile bytes)" in m for m in _process_logged(layer, caplog))


# --- the batched activation format (DeepEP low-latency) ---------------------------------------

BATCHED_BOUND = 2e-2
"""Norm-relative error allowed against ``reference.moe_layer``: vLLM's batched combine weights the
bf16 expert rows in bf16 and sums them in bf16 (the reference weights the fp32 accumulator and sums
in fp32), a few bf16 roundings (2^-8 each) per output."""


class PoisonedBatchedExperts(experts.ChordBatchedExperts):
    """Chord's batched experts handed NaN workspaces and output, and NaN activation rows past each
    expert's count (DeepEP leaves garbage there; vLLM's reference prepare leaves zeros)."""

    def apply(self, output, hidden_states, w1, w2, topk_weights, topk_ids, activation, global_num_experts,
              expert_map, a1q_scale, a2_scale, workspace13, workspace2, expert_tokens_meta,
              apply_router_weight_on_input) -> None:
        for buffer in (output, workspace13, workspace2):
            buffer.fill_(float("nan"))
        counts = expert_tokens_meta.expert_num_tokens[: hidden_states.shape[0]].tolist()
        for e, c in enumerate(counts):
            hidden_states[e, c:] = float("nan")
        super().apply(output, hidden_states, w1, w2, topk_weights, topk_ids, activation, global_num_experts,
                      expert_map, a1q_scale, a2_scale, workspace13, workspace2, expert_tokens_meta,
                      apply_router_weight_on_input)


def _rel_err(got: torch.Tensor, want: torch.Tensor) -> float:
    return ((got.float() - want.float()).norm() / want.float().norm().clamp_min(1e-30)).item()


def _batched_kernel(ckpt, *, rank: int, max_num_tokens: int):
    """vLLM's FusedMoEKernel of the reference BatchedPrepareAndFinalize (EP2 rank ``rank``, linear
    placement as it assumes) and Chord's batched experts on the rank's packed source weights."""
    w13, w2, expert_map = _rank_source(ckpt["tensors"], ep=2, ep_rank=rank)
    local = w13[0].shape[0]
    p13, p2 = (chord_kernels.pack("indexed", *w, profile="h200_ep8") for w in (w13, w2))
    moe = vs.moe_config(vs.parallel_config(ep=2, ep_rank=rank, dp=2, all2all="deepep_low_latency"),
                        experts=E, hidden=H, intermediate=INTER)
    quant = ChordWNA16MoEMethod.get_fused_moe_quant_config(None, None)
    prepare_finalize = BatchedPrepareAndFinalize(max_num_tokens, local, num_dispatchers=1, rank=rank)
    batched = PoisonedBatchedExperts(moe, quant, max_num_tokens=max_num_tokens, num_dispatchers=1, w13=p13, w2=p2,
                                     backend=core.REFERENCE)
    return mk.FusedMoEKernel(prepare_finalize, batched), p13, p2, w13, w2, expert_map


def _routed(m: int, top_k: int, seed: int, case: str) -> tuple[torch.Tensor, torch.Tensor]:
    ids, weights = vs.routing(m, E, top_k, seed=seed)
    if case == "hot" and m:  # every token's first choice is expert 5 (rank 1's second)
        ids[:, 0] = 5
        ids[:, 1:] = torch.where(ids[:, 1:] == 5, 6, ids[:, 1:])
    if case == "empty" and m:  # nobody picks expert 0 or 4 (each rank's first)
        pool = torch.tensor([1, 2, 3, 5, 6, 7], dtype=torch.int32)
        g = torch.Generator().manual_seed(seed)
        ids = torch.stack([pool[torch.randperm(len(pool), generator=g)[:top_k]] for _ in range(m)])
    return ids, weights


@pytest.mark.parametrize("rank", [0, 1])
@pytest.mark.parametrize(("m", "top_k", "case"), [(1, 2, "random"), (1, 1, "random"), (17, 3, "hot"),
                                                   (9, 2, "empty"), (33, 4, "random")])
def test_batched_apply_through_vllms_batched_prepare_finalize(ckpt, rank, m, top_k, case) -> None:
    kernel, p13, p2, w13, w2, expert_map = _batched_kernel(ckpt, rank=rank, max_num_tokens=40)
    ids, weights = _routed(m, top_k, seed=m * 10 + rank, case=case)
    x = vs.activations(m, H, seed=m)
    got = kernel.apply(x, p13.tensors["tiles"], p2.tensors["tiles"], topk_weights=weights, topk_ids=ids,
                       activation=vs.MoEActivation.SILU, global_num_experts=E, expert_map=expert_map,
                       apply_router_weight_on_input=False)
    want = reference.moe_layer(x, w13, w2, weights, ids, global_num_experts=E, expert_map=expert_map)
    assert got.shape == (m, H) and torch.isfinite(got).all()
    if want.float().norm() == 0:  # every choice on the other rank: nothing here
        assert torch.equal(got, want)
    else:
        assert _rel_err(got, want) < BATCHED_BOUND, _rel_err(got, want)


def test_batched_bound_can_fail(ckpt) -> None:
    """The bound is tight enough to see one expert's rows go missing."""
    kernel, p13, p2, w13, w2, expert_map = _batched_kernel(ckpt, rank=1, max_num_tokens=40)
    ids, weights = vs.routing(24, E, 2, seed=3)
    x = vs.activations(24, H, seed=3)
    got = kernel.apply(x, p13.tensors["tiles"], p2.tensors["tiles"], topk_weights=weights, topk_ids=ids,
                       activation=vs.MoEActivation.SILU, global_num_experts=E, expert_map=expert_map,
                       apply_router_weight_on_input=False)
    fewer = expert_map.clone()
    fewer[7] = -1  # the reference without rank 1's last expert
    want = reference.moe_layer(x, w13, w2, weights, ids, global_num_experts=E, expert_map=fewer)
    assert _rel_err(got, want) > 10 * BATCHED_BOUND


@pytest.fixture(scope="module")
def ll_ckpt(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Hidden size 2048: the smallest DeepEP low-latency takes without padding."""
    dims = {**DIMS, "hidden": 2048, "intermediate": 128}
    src = write_checkpoint(tmp_path_factory.mktemp("ll"), kimi_config("k2-thinking", **dims),
                           kimi_tensors("k2-thinking", **dims))
    return {"src": src, "tensors": vs.read_tensors(src)}


@pytest.fixture
def deepep_ll(monkeypatch: pytest.MonkeyPatch):
    """DeepEP low-latency as far as a CPU process gets: DeepEP is not installed (vLLM's padding rule
    for it is its class's, and 2048 needs none), and its prepare/finalize is vLLM's reference
    batched one, which produces the same format in one process."""
    monkeypatch.setattr(decision, "maybe_roundup_layer_hidden_size", lambda hidden, dtype, parallel: hidden)
    monkeypatch.setattr(method, "maybe_make_prepare_finalize", lambda moe, **_: BatchedPrepareAndFinalize(
        moe.max_num_tokens, moe.num_local_experts, num_dispatchers=1, rank=moe.moe_parallel_config.ep_rank))
    return dict(ep=2, ep_rank=1, dp=2, all2all="deepep_low_latency")


def _ll_layer(ll_ckpt, rank: dict):
    _, config = vs.quant_config(ll_ckpt["src"])
    return vs.build_layer(config, experts=E, hidden=2048, intermediate=128, **rank)


def test_batched_format_stays_vllms_when_switched_off(ll_ckpt, deepep_ll, monkeypatch, caplog) -> None:
    monkeypatch.setenv("CHORD_VLLM_BATCHED", "0")
    _compat.logger.addHandler(caplog.handler)
    _compat._logged.clear()
    try:  # vLLM's own WNA16 method takes the layer (and on this CPU finds no kernel for it)
        with caplog.at_level("INFO", logger=_compat.logger.name), \
                pytest.raises(NotImplementedError, match="No WNA16 MoE backend supports"):
            _ll_layer(ll_ckpt, deepep_ll)
    finally:
        _compat.logger.removeHandler(caplog.handler)
    (line,) = {r.getMessage() for r in caplog.records if "does not serve" in r.getMessage()}
    assert "CHORD_VLLM_BATCHED=0 leaves the deepep_low_latency all2all's batched activation format to vLLM" in line


def test_batched_format_is_served_by_chords_batched_experts(ll_ckpt, deepep_ll, caplog) -> None:
    _compat.logger.addHandler(caplog.handler)
    _compat._logged.clear()
    try:
        with caplog.at_level("INFO", logger=_compat.logger.name):
            layer = _ll_layer(ll_ckpt, deepep_ll)
    finally:
        _compat.logger.removeHandler(caplog.handler)
    assert isinstance(layer.quant_method, ChordWNA16MoEMethod) and layer.quant_method.profile == "h200_ep8"
    assert any("Chord's batched experts run the deepep_low_latency all2all's batched activation format "
               "(Chord's batched experts measured 1.24-1.36x vLLM's humming grouped_masked layer"
               in r.getMessage() for r in caplog.records)
    vs.load_experts(layer, ll_ckpt["tensors"])
    assert any("ChordBatchedExperts" in m for m in _process_logged(layer, caplog))
    assert type(layer.quant_method.moe_kernel.fused_experts) is experts.ChordBatchedExperts
    w13, w2 = vs.source_weights(ll_ckpt["tensors"], 1, [4, 5, 6, 7])  # EP2 rank 1, linear placement
    for m in (1, 6, 31):
        ids, weights = vs.routing(m, E, 2, seed=m)
        x = vs.activations(m, 2048, seed=m)
        got = vs.apply(layer, x, weights, ids)
        want = reference.moe_layer(x, w13, w2, weights, ids, global_num_experts=E, expert_map=layer.expert_map)
        assert got.shape == (m, 2048) and _rel_err(got, want) < BATCHED_BOUND, (m, _rel_err(got, want))


def test_expected_rows_come_from_the_dp_token_counts(monkeypatch) -> None:
    moe = vs.moe_config(vs.parallel_config(ep=8, dp=8, all2all="deepep_low_latency"), experts=384, hidden=7168,
                        intermediate=2048, top_k=8)
    _, _, (p13, p2) = _tiny_packed()
    batched = experts.ChordBatchedExperts(moe, ChordWNA16MoEMethod.get_fused_moe_quant_config(None, None),
                                          max_num_tokens=128, num_dispatchers=8, w13=p13, w2=p2, backend=core.REFERENCE)
    assert batched.max_m == 1024
    assert batched.expected_rows_per_expert(8, 384) == core.DECODE_ROWS_PER_EXPERT  # no forward context
    for per_rank, want in ((48, 8), (256, 43)):
        dp = SimpleNamespace(num_tokens_across_dp_cpu=torch.full((8,), per_rank))
        monkeypatch.setattr(forward_context, "is_forward_context_available", lambda: True)
        monkeypatch.setattr(forward_context, "get_forward_context", lambda dp=dp: SimpleNamespace(dp_metadata=dp))
        assert batched.expected_rows_per_expert(8, 384) == want
    assert batched.workspace_shapes(1024, 256, 64, 8, 384, 4, None, vs.MoEActivation.SILU) == (
        (4 * 1024, 64), (4 * 1024, 128), (4, 1024, 64))  # workspace13 holds only the output


def _tiny_packed():
    w13, w2 = random_quantized(4, 256, 64), random_quantized(4, 64, 128)
    return w13, w2, (chord_kernels.pack("indexed", *w13, profile="h200_ep8"),
                     chord_kernels.pack("indexed", *w2, profile="h200_ep8"))
