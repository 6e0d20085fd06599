"""Test helpers: read the source experts of a tiny checkpoint and run the reference MoE layer."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open

from chord_kernels.reference import moe_layer
from chord_pack.load import read_packed
from chord_pack.names import PACKED_PROJECTIONS, expert_name


def source_experts(src: Path, layer: int, prefix: str = "") -> tuple[tuple, tuple]:
    """((w13 packed, scales), (w2 packed, scales)) stacked over experts, read with safetensors."""
    weight_map = json.loads((src / "model.safetensors.index.json").read_text())["weight_map"]

    def get(name: str) -> torch.Tensor:
        with safe_open(str(src / weight_map[name]), framework="pt") as f:
            return f.get_tensor(name)

    experts = sorted({int(n.split(".experts.")[1].split(".")[0]) for n in weight_map
                      if f"layers.{layer}.mlp.experts." in n})

    def stack(projs: tuple[str, ...], kind: str) -> torch.Tensor:
        return torch.stack([torch.cat([get(expert_name(prefix, layer, e, p, kind)) for p in projs]) for e in experts])

    w13, w2 = ((stack(projs, "weight_packed"), stack(projs, "weight_scale")) for projs in PACKED_PROJECTIONS.values())
    return w13, w2


def assert_moe_equal(src: Path, out: Path, layer: int, prefix: str = "", *, tokens: int = 9,
                     seed: int = 0) -> torch.Tensor:
    """The reference MoE output from the converted weights equals the one from the source."""
    w13_src, w2_src = source_experts(src, layer, prefix)
    w13, w2 = read_packed(out, layer, "w13"), read_packed(out, layer, "w2")
    e, _, hidden_words = w13_src[0].shape
    g = torch.Generator().manual_seed(seed)
    hidden = (torch.randn(tokens, hidden_words * 8, generator=g) * 0.5).to(torch.bfloat16)
    topk_ids = torch.stack([torch.randperm(e, generator=g)[:2] for _ in range(tokens)]).to(torch.int32)
    topk_weights = torch.rand(tokens, 2, generator=g).softmax(dim=-1)
    want = moe_layer(hidden, w13_src, w2_src, topk_weights, topk_ids, global_num_experts=e)
    got = moe_layer(hidden, w13, w2, topk_weights, topk_ids, global_num_experts=e)
    assert want.abs().max() > 0, "degenerate test: the MoE output is all zeros"
    assert torch.equal(got, want)
    return got
