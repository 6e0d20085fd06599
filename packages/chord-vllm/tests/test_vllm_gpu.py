"""Chord's MoE layer inside vLLM 0.33's classes on a GPU, with the real kernels: weights loaded
through vLLM's loader as a TP and an EP rank, packed after loading, kernels warmed, then
``FusedMoEKernel.apply`` (vLLM's workspace manager, no-DP/EP prepare/finalize) against
``chord_kernels.reference.moe_layer``, eagerly and replayed from a CUDA graph.

Runs where vLLM's Python imports next to a CUDA torch: the H200 probe
(``scripts/vllm_h200_probe.sh``) stages vLLM 0.33's Python files for that.
"""

from __future__ import annotations

import vllm_support as vs

vs.require_vllm()  # skips this module without vLLM 0.33 (fails under CHORD_REQUIRE_VLLM=1)

import copy  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

import chord_vllm  # noqa: E402
from chord_kernels import reference, unpack  # noqa: E402
from chord_kernels.formats import random_quantized  # noqa: E402
from chord_pack.demo import KIMI_INT4_QUANTIZATION_CONFIG  # noqa: E402
from chord_vllm import core  # noqa: E402

pytestmark = pytest.mark.gpu
REL_TOL = 5e-3
# Kimi K2 with fewer experts (time): hidden 7168, intermediate 2048, top-8 of 64.
EXPERTS, HIDDEN, INTER, TOP_K = 64, 7168, 2048, 8


def _kimi_config():
    """The compressed-tensors config of Kimi K2's checkpoints, as vLLM reads it."""
    from chord_vllm.config import ChordCompressedTensorsConfig

    return ChordCompressedTensorsConfig.from_config(copy.deepcopy(KIMI_INT4_QUANTIZATION_CONFIG))


@pytest.fixture(scope="module")
def vllm_cuda():
    from vllm.platforms import current_platform
    from vllm.v1.worker.workspace import init_workspace_manager

    from chord_kernels import hardware
    from chord_vllm import _compat

    chord_vllm.register()
    init_workspace_manager(torch.device("cuda"))
    with pytest.MonkeyPatch.context() as mp:
        if not current_platform.is_cuda():
            # The H200 probe runs vLLM's Python files as a CPU build (its CUDA platform needs the
            # compiled ops): Chord's decision then takes the GPU's architecture from torch.
            mp.setattr(_compat, "device_arch", lambda: (hardware.arch(0), ""))
        yield


def _source(seed: int):
    g = torch.Generator(device="cuda").manual_seed(seed)
    gate_up = random_quantized(EXPERTS, 2 * INTER, HIDDEN, generator=g, device="cuda")
    down = random_quantized(EXPERTS, HIDDEN, INTER, generator=g, device="cuda")
    return gate_up, down


def _load(layer, gate_up, down) -> None:
    """Each expert's gate, up and down tensors through vLLM's weight_loader (TP/EP sharding)."""
    params = dict(layer.named_parameters())
    for e in range(EXPERTS):
        for shard, (packed, scales), rows in (("w1", gate_up, slice(0, INTER)), ("w3", gate_up, slice(INTER, 2 * INTER)),
                                              ("w2", down, slice(None))):
            stem = "w2" if shard == "w2" else "w13"
            for kind, tensor in (("weight_packed", packed), ("weight_scale", scales)):
                param = params[f"{stem}_{kind}"]
                layer.weight_loader(param, tensor[e, rows].cpu(), f"experts.{e}.{stem}_{kind}", shard, e, True)


@pytest.mark.parametrize(("name", "rank"), [("TP8 rank 3", dict(tp=8, tp_rank=3)), ("EP8 rank 5", dict(ep=8, ep_rank=5))])
def test_apply_with_chord_kernels(vllm_cuda, name, rank) -> None:
    gate_up, down = _source(seed=5)
    layer = vs.build_layer(_kimi_config(), experts=EXPERTS, hidden=HIDDEN, intermediate=INTER, top_k=TOP_K, **rank)
    assert type(layer.quant_method).__name__ == "ChordWNA16MoEMethod", layer.quant_method
    _load(layer, gate_up, down)  # on the CPU, as vLLM reads safetensors
    layer.to("cuda")
    layer.quant_method.process_weights_after_loading(layer)  # packs on the GPU, compiles, warms
    assert layer.quant_method.moe_kernel.fused_experts.backend.gemm is core.kernel_gemm
    assert layer.chord_w13_tiles.is_cuda
    local13, local2 = unpack(layer.quant_method.w13), unpack(layer.quant_method.w2)
    for m in (1, 16, 200):
        ids, weights = vs.routing(m, EXPERTS, TOP_K, seed=m)
        ids, weights, x = ids.cuda(), weights.cuda(), vs.activations(m, HIDDEN, seed=m).cuda()
        got = vs.apply(layer, x, weights, ids)
        want = reference.moe_layer(x, local13, local2, weights, ids, global_num_experts=EXPERTS,
                                   expert_map=layer.expert_map)
        err = ((got.float() - want.float()).norm() / want.float().norm()).item()
        assert torch.isfinite(got).all() and err < REL_TOL, (m, err)
    # A CUDA graph of the whole apply (vLLM captures the MoE op this way), replayed on new routing.
    m = 8
    ids, weights = vs.routing(m, EXPERTS, TOP_K, seed=1)
    ids, weights, x = ids.cuda(), weights.cuda(), vs.activations(m, HIDDEN, seed=1).cuda()
    graph = torch.cuda.CUDAGraph()
    with vs.set_current_vllm_config(vs.VllmConfig()):
        layer.quant_method.apply(layer, x, weights, ids, None, None)  # warm: sizes vLLM's workspace
        with torch.cuda.graph(graph):
            out = layer.quant_method.apply(layer, x, weights, ids, None, None)
    new_ids, new_weights = vs.routing(m, EXPERTS, TOP_K, seed=2)
    ids.copy_(new_ids)
    weights.copy_(new_weights)
    graph.replay()
    torch.cuda.synchronize()
    want = reference.moe_layer(x, local13, local2, weights, ids, global_num_experts=EXPERTS, expert_map=layer.expert_map)
    assert ((out.float() - want.float()).norm() / want.float().norm()).item() < REL_TOL
