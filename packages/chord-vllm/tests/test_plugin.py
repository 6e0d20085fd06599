"""The plugin inside vLLM 0.33: registration, config resolution, Chord-or-vLLM decisions, and the
vLLM signatures it overrides."""

from __future__ import annotations

import vllm_support as vs

vs.require_vllm()  # skips this module without vLLM 0.33 (fails under CHORD_REQUIRE_VLLM=1)

import importlib.metadata  # noqa: E402
import inspect  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import shutil  # noqa: E402
from pathlib import Path  # noqa: E402
from types import SimpleNamespace  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
import vllm  # noqa: E402
import vllm.plugins  # noqa: E402
from compressed_tensors.quantization import QuantizationArgs  # noqa: E402
from vllm import forward_context  # noqa: E402
from vllm.model_executor.layers.fused_moe import (  # noqa: E402
    FusedMoEMethodBase,
    RoutedExperts,
    all2all_utils,
)
from vllm.model_executor.layers.fused_moe import config as fused_moe_config  # noqa: E402
from vllm.model_executor.layers.fused_moe import modular_kernel as mk  # noqa: E402
from vllm.model_executor.layers.fused_moe import moe_align_block_size as align_module  # noqa: E402
from vllm.model_executor.layers.fused_moe.prepare_finalize.batched import BatchedPrepareAndFinalize  # noqa: E402
from vllm.model_executor.layers.quantization import (  # noqa: E402
    _CUSTOMIZED_METHOD_TO_QUANT_CONFIG,
    get_quantization_config,
)
from vllm.model_executor.layers.quantization.base_config import QuantizationConfig  # noqa: E402
from vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors import (  # noqa: E402
    CompressedTensorsConfig,
)
from vllm.model_executor.layers.quantization.utils.quant_utils import kInt4Static32  # noqa: E402

import chord_vllm  # noqa: E402
from chord_pack.demo import kimi_config, kimi_tensors, write_checkpoint  # noqa: E402
from chord_vllm import _compat, decision  # noqa: E402
from chord_vllm.config import ChordCompressedTensorsConfig  # noqa: E402
from chord_vllm.experts import ChordBatchedExperts, ChordIndexedExperts  # noqa: E402
from chord_vllm.method import ChordWNA16MoEMethod  # noqa: E402

DIMS = {"layers": 1, "experts": 8, "hidden": 256, "intermediate": 128}


@pytest.fixture
def chord_log(caplog: pytest.LogCaptureFixture):
    """Records of the plugin's logger (a child of vLLM's, which does not propagate to the root)."""
    _compat.logger.addHandler(caplog.handler)
    caplog.set_level(logging.DEBUG, logger=_compat.logger.name)
    propagate, _compat.logger.propagate = _compat.logger.propagate, False
    _compat._logged.clear()
    yield caplog
    _compat.logger.removeHandler(caplog.handler)
    _compat.logger.propagate = propagate


@pytest.fixture
def fresh_registry(monkeypatch: pytest.MonkeyPatch):
    """No custom quantization configs and no plugin loaded yet, restored afterwards."""
    saved = dict(_CUSTOMIZED_METHOD_TO_QUANT_CONFIG)
    _CUSTOMIZED_METHOD_TO_QUANT_CONFIG.clear()
    monkeypatch.setattr(chord_vllm, "_registered", False)
    monkeypatch.setattr(vllm.plugins, "plugins_loaded", False)
    monkeypatch.delenv("CHORD_VLLM", raising=False)
    yield
    _CUSTOMIZED_METHOD_TO_QUANT_CONFIG.clear()
    _CUSTOMIZED_METHOD_TO_QUANT_CONFIG.update(saved)


@pytest.fixture
def on_h200(monkeypatch: pytest.MonkeyPatch):
    """Make this CPU process look like an H200 with nvcc to the plugin's device checks."""
    monkeypatch.setattr(_compat, "device_arch", lambda: ("sm_90a", ""))
    monkeypatch.setattr(_compat, "nvcc_problem", lambda: None)


def _messages(log: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in log.records if r.name == _compat.logger.name]


# --- registration ---------------------------------------------------------------------------

def test_entry_point_loads_once_without_cuda(fresh_registry, monkeypatch, chord_log) -> None:
    (ep,) = [e for e in importlib.metadata.entry_points(group="vllm.general_plugins") if e.name == "chord"]
    assert ep.value == "chord_vllm:register"
    calls = []
    real = chord_vllm.register
    monkeypatch.setattr(chord_vllm, "register", lambda: (calls.append(1), real())[1])
    monkeypatch.delenv("VLLM_PLUGINS", raising=False)
    vllm.plugins.load_general_plugins()
    vllm.plugins.load_general_plugins()
    assert calls == [1]
    assert get_quantization_config("compressed-tensors") is ChordCompressedTensorsConfig
    assert not torch.cuda.is_initialized()
    chord_vllm.register()  # a second call in the same process changes nothing and logs nothing
    took_over = [m for m in _messages(chord_log) if "run on Chord kernels where supported" in m]
    assert len(took_over) == 1 and "CHORD_VLLM=0" in took_over[0]


def test_vllm_plugins_can_exclude_it(fresh_registry, monkeypatch) -> None:
    monkeypatch.setenv("VLLM_PLUGINS", "some_other_plugin")
    vllm.plugins.load_general_plugins()
    assert get_quantization_config("compressed-tensors") is CompressedTensorsConfig


def test_off_switch_is_a_no_op(fresh_registry, monkeypatch, chord_log) -> None:
    monkeypatch.setenv("CHORD_VLLM", "0")
    chord_vllm.register()
    assert get_quantization_config("compressed-tensors") is CompressedTensorsConfig
    assert any("CHORD_VLLM=0" in m for m in _messages(chord_log))


def test_bad_switch_value_is_logged_not_raised(fresh_registry, monkeypatch, chord_log) -> None:
    monkeypatch.setenv("CHORD_VLLM", "maybe")
    chord_vllm.register()  # vLLM does not catch exceptions from plugin functions
    assert get_quantization_config("compressed-tensors") is CompressedTensorsConfig
    assert any("expected 0 (off), 1 (force) or auto, got 'maybe'" in m for m in _messages(chord_log))


@pytest.mark.parametrize("value", ["yes", "2", "force"])
def test_bad_batched_switch_value_is_refused_on_every_deployment(fresh_registry, monkeypatch, chord_log,
                                                                 value: str) -> None:
    # Checked at registration: a TP or standard-EP deployment never reaches the batched decision.
    monkeypatch.setenv("CHORD_VLLM_BATCHED", value)
    chord_vllm.register()
    assert get_quantization_config("compressed-tensors") is CompressedTensorsConfig
    (line,) = [m for m in _messages(chord_log) if "not loaded" in m]
    assert line.startswith("Chord plugin not loaded: CHORD_VLLM_BATCHED: expected 1") and repr(value) in line


@pytest.mark.parametrize("version", ["0.34.0", "0.32.9", "0.34.0rc1", "not-a-version"])
def test_version_gate(fresh_registry, monkeypatch, chord_log, version: str) -> None:
    monkeypatch.setattr(vllm, "__version__", version)
    chord_vllm.register()
    assert get_quantization_config("compressed-tensors") is CompressedTensorsConfig
    (line,) = [m for m in _messages(chord_log) if "not loaded" in m]
    assert f"this is vLLM {version}" in line and "tested with vLLM 0.33.x" in line
    monkeypatch.setenv("CHORD_VLLM", "1")
    chord_vllm.register()
    assert get_quantization_config("compressed-tensors") is ChordCompressedTensorsConfig
    assert any(f"forced onto untested vLLM {version}" in m for m in _messages(chord_log))


@pytest.mark.parametrize("version", ["0.33.0", "0.33.1", "0.33.2.dev7+g1234abc", "0.33.0rc2"])
def test_version_gate_takes_every_033(version: str) -> None:
    assert _compat.vllm_version_supported(version)


# --- config resolution ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Tiny Kimi K2-Thinking and K2.5 checkpoints, and a chord-pack conversion of the first (schema 1)."""
    from chord_pack.convert import convert

    root = tmp_path_factory.mktemp("kimi")
    out = {}
    for style in ("k2-thinking", "k2.5"):
        out[style] = write_checkpoint(root / style, kimi_config(style, **DIMS), kimi_tensors(style, **DIMS))
    out["packed"] = root / "packed"
    convert(out["k2-thinking"], out["packed"], "indexed", "h200_ep8", max_shard_bytes=1_000_000,
            experts_per_tensor=DIMS["experts"])  # schema 1: one tensor of all experts
    return out


@pytest.fixture(autouse=True)
def registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHORD_VLLM", raising=False)
    chord_vllm.register()


@pytest.mark.parametrize("style", ["k2-thinking", "k2.5"])
def test_kimi_configs_resolve_to_chord_config(checkpoints, style: str) -> None:
    model, config = vs.quant_config(checkpoints[style])
    assert model.quantization == "compressed-tensors"
    assert type(config) is ChordCompressedTensorsConfig and config.chord_pack is None
    assert config.quant_format == "pack-quantized"
    if style == "k2.5":  # the vision tower and projector stay unquantized
        from vllm.model_executor.models.kimi_k25 import KimiK25ForConditionalGeneration

        assert KimiK25ForConditionalGeneration._maybe_ignore_quant_config(object(), config) is None


def test_chord_packed_config_reads_the_block(checkpoints) -> None:
    model, config = vs.quant_config(checkpoints["packed"])
    assert model.quantization == "compressed-tensors" and config.quant_format == "chord-packed"
    assert set(config.chord_pack) == {"w13", "w2"}
    w13 = config.chord_pack["w13"]
    assert (w13.num_experts, w13.n, w13.k, w13.profile) == (8, 256, 256, "h200_ep8")
    mapper = config.get_checkpoint_weight_mapper()
    assert mapper.map_name("model.layers.1.mlp.experts.chord.w13.tiles") == \
        "model.layers.1.mlp.experts.routed_experts.chord_w13_tiles"
    assert mapper.map_name("model.layers.1.mlp.experts.chord.w2.experts_6_11.tiles") == \
        "model.layers.1.mlp.experts.routed_experts.chord_w2_experts_6_11_tiles"  # schema 2: one per range
    assert mapper.map_name("model.layers.1.mlp.experts.3.gate_proj.g_idx") is None  # vLLM's own rule kept


def _edit_config(src: Path, dst: Path, edit) -> Path:
    shutil.copytree(src, dst)
    config = json.loads((dst / "config.json").read_text())
    edit(config)
    (dst / "config.json").write_text(json.dumps(config))
    return dst


@pytest.mark.parametrize(("edit", "message"), [
    (lambda c: c.pop("chord_pack"), "there is no chord_pack block"),
    (lambda c: c["chord_pack"].update(layout_version=99), "layout_version is 99; this chord-vllm serves 2"),
    (lambda c: c["chord_pack"].update(layout="grouped"),
     "layout is 'grouped'; this chord-vllm serves one of 'indexed', 'contiguous', 'masked'"),
    (lambda c: c["chord_pack"].update(schema_version=3), "schema_version is 3; this chord-vllm serves one of 1, 2"),
    (lambda c: c["chord_pack"].update(schema_version=2), "expert_ranges None do not cover experts 0..7"),
    (lambda c: c["chord_pack"].update(expert_ranges=[[0, 7]]), "schema_version 1 has no expert_ranges"),
    (lambda c: c["chord_pack"]["projections"].pop("w2"), "projections are ['w13']"),
])
def test_chord_packed_config_refuses_what_it_cannot_serve(checkpoints, tmp_path, edit, message) -> None:
    bad = _edit_config(checkpoints["packed"], tmp_path / "bad", edit)
    with pytest.raises(ValueError, match="config.json") as info:
        vs.quant_config(bad)
    assert message in str(info.value)


# --- method selection -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def world_of_one(tmp_path_factory: pytest.TempPathFactory):
    """vLLM's process groups for one CPU process (gloo, file rendezvous: no port)."""
    from vllm.distributed import parallel_state as ps

    store = tmp_path_factory.mktemp("dist") / "rendezvous"
    with vs.set_current_vllm_config(vs.VllmConfig()):
        ps.init_distributed_environment(world_size=1, rank=0, distributed_init_method=f"file://{store}",
                                        local_rank=0, backend="gloo")
        ps.initialize_model_parallel(1, 1)
    yield
    ps.destroy_model_parallel()
    ps.destroy_distributed_environment()


def test_moe_layers_get_chord_and_linear_layers_stay_vllms(checkpoints, on_h200, world_of_one) -> None:
    from vllm.model_executor.layers.linear import ReplicatedLinear

    _, config = vs.quant_config(checkpoints["k2-thinking"])
    layer = vs.build_layer(config, experts=8, hidden=256, intermediate=128)
    assert type(layer.quant_method) is ChordWNA16MoEMethod and layer.quant_method.profile == "h200_tp8"
    ep = vs.build_layer(config, experts=8, hidden=256, intermediate=128, ep=2, ep_rank=1)
    assert type(ep.quant_method) is ChordWNA16MoEMethod and ep.quant_method.profile == "h200_ep8"
    with vs.set_current_vllm_config(vs.VllmConfig()):
        attn = ReplicatedLinear(256, 256, bias=False, quant_config=config, prefix="model.layers.1.self_attn.o_proj")
    assert type(attn.quant_method).__name__ == "UnquantizedLinearMethod"  # Kimi ignores attention


def _scheme(**weights) -> dict:
    base = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 32, "symmetric": True,
            "dynamic": False, "actorder": None}
    return {"weights": QuantizationArgs.model_validate({**base, **weights}), "input_activations": None,
            "format": "pack-quantized"}


def _stand_in(parallel=None, intermediate: int = 128, **moe) -> SimpleNamespace:
    """What decide() reads of a RoutedExperts, without building one."""
    cfg = vs.moe_config(parallel or vs.parallel_config(), experts=8, hidden=256, intermediate=intermediate, **moe)
    return SimpleNamespace(moe_config=cfg, apply_router_weight_on_input=False, layer_name="model.layers.1.mlp.experts")


FALLBACKS = [
    ("group 128", lambda: ([_scheme(group_size=128)] * 3, _stand_in()), "group_size=128"),
    ("asymmetric", lambda: ([_scheme(symmetric=False)] * 3, _stand_in()), "symmetric=False"),
    ("W8A16", lambda: ([_scheme(num_bits=8)] * 3, _stand_in()), "num_bits=8"),
    ("quantized activations", lambda: ([{**_scheme(), "input_activations": _scheme()["weights"]}] * 3, _stand_in()),
     "activations are quantized"),
    ("other format", lambda: ([{**_scheme(), "format": "marlin-24"}] * 3, _stand_in()), "format is 'marlin-24'"),
    ("mixed schemes", lambda: ([_scheme(), _scheme(), _scheme(group_size=128)], _stand_in()), "different quantization schemes"),
    ("LoRA", lambda: ([_scheme()] * 3, _stand_in(is_lora_enabled=True)), "LoRA"),
    ("EPLB", lambda: ([_scheme()] * 3, _stand_in(vs.parallel_config(eplb=True))), "EPLB is on"),
    ("--moe-backend", lambda: ([_scheme()] * 3, _stand_in(moe_backend="marlin")), "--moe-backend marlin"),
    ("fp16", lambda: ([_scheme()] * 3, _stand_in(in_dtype=torch.float16)), "torch.float16"),
    ("bias", lambda: ([_scheme()] * 3, _stand_in(has_bias=True)), "biases"),
    ("odd intermediate", lambda: ([_scheme()] * 3, _stand_in(intermediate=144)), "not a multiple of 32"),
    ("FlashInfer all2all", lambda: ([_scheme()] * 3, _stand_in(vs.parallel_config(ep=8, dp=8, all2all="flashinfer_nvlink_one_sided"))),
     "the flashinfer_nvlink_one_sided all2all is not supported (Chord's experts take allgather_reducescatter, "
     "deepep_high_throughput, deepep_v2 and deepep_low_latency)"),
]


@pytest.mark.parametrize(("case", "make", "reason"), FALLBACKS, ids=[f[0] for f in FALLBACKS])
def test_every_fallback_says_why(on_h200, chord_log, case, make, reason) -> None:
    schemes, layer = make()
    got = decision.decide(layer, schemes)
    assert not got.use_chord and reason in got.reason
    (line,) = [m for m in _messages(chord_log) if "does not serve" in m]
    assert reason in line and "vLLM's own method runs them" in line
    decision.decide(layer, schemes)  # the same reason is logged once per process
    assert len([m for m in _messages(chord_log) if "does not serve" in m]) == 1


def test_fallback_on_devices_without_chord_kernels(monkeypatch, chord_log) -> None:
    monkeypatch.setattr(_compat, "nvcc_problem", lambda: None)
    got = decision.decide(_stand_in(), [_scheme()] * 3)  # this CPU machine
    assert not got.use_chord and "the platform is" in got.reason
    monkeypatch.setattr(_compat, "device_arch", lambda: ("sm_90a", ""))
    monkeypatch.setattr(_compat, "nvcc_problem", lambda: "no nvcc to compile Chord's kernels (...)")
    assert "no nvcc" in decision.decide(_stand_in(), [_scheme()] * 3).reason


def test_no_nvcc_names_both_ways_out(monkeypatch) -> None:
    from chord_kernels.jit import nvcc

    monkeypatch.setattr(nvcc, "nvcc_candidates", lambda: [])
    problem = _compat.nvcc_problem()
    assert "pip install 'chord-vllm[nvcc]'" in problem and "chord-kernels precompile" in problem
    assert f"{_compat.ENV_SWITCH}=1" in problem


def test_force_turns_a_fallback_into_an_error(on_h200, monkeypatch) -> None:
    monkeypatch.setenv("CHORD_VLLM", "1")
    with pytest.raises(ValueError, match=r"CHORD_VLLM=1 forces Chord, but .*LoRA"):
        decision.decide(_stand_in(is_lora_enabled=True), [_scheme()] * 3)
    monkeypatch.setenv("CHORD_VLLM", "0")
    assert decision.decide(_stand_in(), [_scheme()] * 3).reason == "CHORD_VLLM=0"


LOW_LATENCY = dict(ep=8, dp=8, all2all="deepep_low_latency")


@pytest.fixture
def deepep_ll_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    """DeepEP is not installed here, so vLLM's padding rule for it cannot run: 256 stands for 7168,
    which DeepEP low-latency takes unpadded."""
    monkeypatch.setattr(decision, "maybe_roundup_layer_hidden_size", lambda hidden, dtype, parallel: hidden)


def test_deepep_low_latency_is_served_and_says_why(on_h200, deepep_ll_hidden, chord_log) -> None:
    layer = _stand_in(vs.parallel_config(**LOW_LATENCY))
    got = decision.decide(layer, [_scheme()] * 3)
    assert got.use_chord and got.profile == "h200_ep8"
    (line,) = [m for m in _messages(chord_log) if "batched" in m]
    assert line == ("Chord's batched experts run the deepep_low_latency all2all's batched activation format "
                    "(Chord's batched experts measured 1.24-1.36x vLLM's humming grouped_masked layer on an "
                    "H200, 1.92x in vLLM's default 2048-row buffers; CHORD_VLLM_BATCHED=0 leaves it to vLLM)")
    standard = decision.decide(_stand_in(vs.parallel_config(ep=8)), [_scheme()] * 3)
    assert standard.use_chord and len([m for m in _messages(chord_log) if "batched" in m]) == 1  # no effect there


def test_batched_switch_off_leaves_deepep_low_latency_to_vllm(on_h200, deepep_ll_hidden, monkeypatch,
                                                               chord_log) -> None:
    monkeypatch.setenv("CHORD_VLLM_BATCHED", "0")
    got = decision.decide(_stand_in(vs.parallel_config(**LOW_LATENCY)), [_scheme()] * 3)
    assert not got.use_chord
    assert got.reason == "CHORD_VLLM_BATCHED=0 leaves the deepep_low_latency all2all's batched activation format to vLLM"
    (line,) = [m for m in _messages(chord_log) if "does not serve" in m]
    assert got.reason in line and "vLLM's own method runs them" in line
    assert decision.decide(_stand_in(vs.parallel_config(ep=8)), [_scheme()] * 3).use_chord  # no effect on EP


def test_batched_experts_still_refuse_what_they_cannot_run(on_h200, deepep_ll_hidden, monkeypatch) -> None:
    nixl = decision.decide(_stand_in(vs.parallel_config(ep=8, dp=8, all2all="nixl_ep")), [_scheme()] * 3)
    assert not nixl.use_chord and nixl.reason.startswith("the nixl_ep all2all is not supported (Chord's experts take ")
    monkeypatch.setenv("CHORD_VLLM_BATCHED", "maybe")
    with pytest.raises(ValueError, match=r"CHORD_VLLM_BATCHED: expected 1 \(Chord's batched experts, the default\) "
                                         r"or 0 \(vLLM's\), got 'maybe'"):
        decision.decide(_stand_in(vs.parallel_config(**LOW_LATENCY)), [_scheme()] * 3)


def test_force_with_the_batched_switch_off_names_it(on_h200, monkeypatch) -> None:
    monkeypatch.setenv("CHORD_VLLM", "1")
    monkeypatch.setenv("CHORD_VLLM_BATCHED", "0")
    with pytest.raises(ValueError, match=r"CHORD_VLLM=1 forces Chord, but CHORD_VLLM_BATCHED=0 leaves"):
        decision.decide(_stand_in(vs.parallel_config(**LOW_LATENCY)), [_scheme()] * 3)


def test_chord_packed_without_chord_is_a_clear_error(checkpoints) -> None:
    _, config = vs.quant_config(checkpoints["packed"])
    with pytest.raises(ValueError, match=r"holds its experts only in Chord's layout.*the platform is"):
        vs.build_layer(config, experts=8, hidden=256, intermediate=128)  # no GPU here


def test_stock_vllm_refuses_chord_packed(checkpoints) -> None:
    _, config = vs.quant_config(checkpoints["packed"])
    stock = CompressedTensorsConfig.from_config(dict(config.config))
    with pytest.raises(ValueError, match="only format: pack-quantized"):
        vs.build_layer(stock, experts=8, hidden=256, intermediate=128)


# --- interface conformance ------------------------------------------------------------------

PARALLEL = [
    ("TP", dict(tp=8), True),
    ("EP in one DP rank", dict(ep=8), True),
    ("DP+EP all-gather", dict(ep=8, dp=8), True),
    ("DeepEP high-throughput", dict(ep=8, dp=8, all2all="deepep_high_throughput"), True),
    ("DeepEP v2", dict(ep=8, dp=8, all2all="deepep_v2"), True),
    ("DeepEP low-latency", dict(ep=8, dp=8, all2all="deepep_low_latency"), False),
    ("NIXL EP", dict(ep=8, dp=8, all2all="nixl_ep"), False),
    ("FlashInfer one-sided", dict(ep=8, dp=8, all2all="flashinfer_nvlink_one_sided"), False),
    ("FlashInfer two-sided", dict(ep=8, dp=8, all2all="flashinfer_nvlink_two_sided"), False),
    ("mori", dict(ep=8, dp=8, all2all="mori_low_latency"), False),
    ("moonep", dict(ep=8, dp=8, all2all="moonep"), False),
    ("passthrough", dict(tp=8, all2all="passthrough"), False),
]


@pytest.mark.parametrize(("name", "parallel", "ok"), PARALLEL, ids=[p[0] for p in PARALLEL])
def test_supported_parallel_configs(name, parallel, ok) -> None:
    assert ChordIndexedExperts._supports_parallel_config(vs.parallel_config(**parallel)) is ok
    # the batched experts take exactly DeepEP low-latency (and vLLM's reference batched prepare)
    assert ChordBatchedExperts._supports_parallel_config(vs.parallel_config(**parallel)) is (name == "DeepEP low-latency")


def test_kimi_ep8_layer_is_a_supported_config(on_h200) -> None:
    cfg = vs.moe_config(vs.parallel_config(ep=8), experts=384, hidden=7168, intermediate=2048, top_k=8)
    ok, why = ChordIndexedExperts.is_supported_config(
        ChordIndexedExperts, cfg, kInt4Static32, None, mk.FusedMoEActivationFormat.Standard)
    assert ok, why
    bf16 = ChordIndexedExperts.is_supported_config(
        ChordIndexedExperts, cfg, None, None, mk.FusedMoEActivationFormat.Standard)
    assert bf16 == (False, f"kernel does not support quantization scheme {None}x{None}")
    ll = vs.moe_config(vs.parallel_config(**LOW_LATENCY), experts=384, hidden=7168, intermediate=2048, top_k=8)
    ok, why = ChordBatchedExperts.is_supported_config(
        ChordBatchedExperts, ll, kInt4Static32, None, mk.FusedMoEActivationFormat.BatchedExperts)
    assert ok, why
    assert not ChordBatchedExperts.is_supported_config(
        ChordBatchedExperts, ll, kInt4Static32, None, mk.FusedMoEActivationFormat.Standard)[0]


# The vLLM 0.33 signatures (names, kinds, defaults) chord-vllm overrides or calls. A vLLM bump that
# changes one fails here, naming it, before it can fail inside a server.
SIGNATURES = {
    "FusedMoEExpertsModular.apply":
        "(self, output, hidden_states, w1, w2, topk_weights, topk_ids, activation, global_num_experts, expert_map, a1q_scale, a2_scale, workspace13, workspace2, expert_tokens_meta, apply_router_weight_on_input)",
    "FusedMoEExpertsModular.workspace_shapes":
        "(self, M, N, K, topk, global_num_experts, local_num_experts, expert_tokens_meta, activation)",
    "FusedMoEExpertsModular.moe_problem_size":
        "(self, a1, w1, w2, topk_ids)",
    "FusedMoEExpertsModular.__init__":
        "(self, moe_config, quant_config, max_num_tokens=None, num_dispatchers=None)",
    "FusedMoEExpertsModular.is_supported_config":
        "(cls, moe_config, weight_key, activation_key, activation_format)",
    "FusedMoEMethodBase.create_weights":
        "(self, layer, num_experts, hidden_size, intermediate_size_per_partition, params_dtype, **extra_weight_attrs)",
    "FusedMoEMethodBase.apply":
        "(self, layer, x, topk_weights, topk_ids, shared_experts, shared_experts_input)",
    "FusedMoEMethodBase.maybe_roundup_sizes":
        "(self, hidden_size, intermediate_size_per_partition, act_dtype, moe_parallel_config)",
    "FusedMoEMethodBase.process_weights_after_loading":
        "(self, layer)",
    "RoutedExperts.weight_loader":
        "(self, param, loaded_weight, weight_name, shard_id, expert_id, return_success=False)",
    "RoutedExperts._map_global_expert_id_to_local_expert_id":
        "(self, expert_id)",
    "RoutedExperts._expert_routing_tables":
        "(self)",
    "QuantizationConfig.maybe_update_config":
        "(self, model_name, hf_config=None, revision=None)",
    "CompressedTensorsConfig.get_quant_method":
        "(self, layer, prefix)",
    "CompressedTensorsConfig.get_scheme_dict":
        "(self, layer, layer_name=None)",
    "QuantizationConfig.get_checkpoint_weight_mapper":
        "()",
    "FusedMoEKernel.apply":
        "(self, hidden_states, w1, w2, topk_weights, topk_ids, activation, global_num_experts, expert_map, apply_router_weight_on_input, shared_experts=None, shared_experts_input=None)",
    "all2all_utils.maybe_make_prepare_finalize":
        "(moe, quant_config, routing_tables=None, allow_new_interface=False, use_monolithic=False, all2all_manager=None, input_dtype=None)",
    "all2all_utils.maybe_roundup_layer_hidden_size":
        "(hidden_size, act_dtype, moe_parallel_config)",
    "config.int4_w4a16_moe_quant_config":
        "(w1_scale, w2_scale, w1_zp=None, w2_zp=None, w1_bias=None, w2_bias=None, block_shape=None, a1_gscale=None, a2_gscale=None, gemm1_clamp_limit=None, gemm1_alpha=None, gemm1_beta=None)",
    "FusedMoEExpertsModular.finalize_weight_and_reduce_impl":
        "(self)",
    "FusedMoEExpertsModular.activation_format":
        "()",
    "FusedMoEExpertsModular._supports_parallel_config":
        "(moe_parallel_config)",
    "FusedMoEPrepareAndFinalizeModular.max_num_tokens_per_rank":
        "(self)",
    "FusedMoEPrepareAndFinalizeModular.num_dispatchers":
        "(self)",
    "ExpertTokensMetadata.__init__":
        "(self, expert_num_tokens, expert_num_tokens_cpu, psum_recv_per_rank=None, rank_expert_offset=None)",
    "BatchedPrepareAndFinalize.__init__":
        "(self, max_num_tokens, num_local_experts, num_dispatchers, rank)",
    "forward_context.is_forward_context_available":
        "()",
    "forward_context.get_forward_context":
        "()",
    "DPMetadata.__init__":
        "(self, num_tokens_across_dp_cpu, local_sizes=None)",
    "moe_align_block_size.moe_align_block_size":
        "(topk_ids, block_size, num_experts, expert_map=None, pad_sorted_ids=False, ignore_invalid_experts=False, return_scatter_idx=False)",
}
OWNERS = {"FusedMoEExpertsModular": mk.FusedMoEExpertsModular, "FusedMoEMethodBase": FusedMoEMethodBase,
          "RoutedExperts": RoutedExperts, "QuantizationConfig": QuantizationConfig,
          "CompressedTensorsConfig": CompressedTensorsConfig, "FusedMoEKernel": mk.FusedMoEKernel,
          "all2all_utils": all2all_utils, "config": fused_moe_config, "moe_align_block_size": align_module,
          "FusedMoEPrepareAndFinalizeModular": mk.FusedMoEPrepareAndFinalizeModular,
          "ExpertTokensMetadata": mk.ExpertTokensMetadata, "BatchedPrepareAndFinalize": BatchedPrepareAndFinalize,
          "forward_context": forward_context, "DPMetadata": forward_context.DPMetadata}


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_vllm_signatures_are_the_033_ones(name: str) -> None:
    owner, attr = name.split(".")
    sig = inspect.signature(getattr(OWNERS[owner], attr))
    bare = sig.replace(parameters=[p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values()],
                       return_annotation=inspect.Signature.empty)
    assert str(bare) == SIGNATURES[name], f"vLLM {vllm.__version__} changed {name}: review chord_vllm against it"
