"""Tiny checkpoints in the exact Kimi K2.x INT4 format, for the demo and the tests.

The config block is written literally as Moonshot ships it (K2-Thinking: ``quantization_config``
at the top level; K2.5/K2.6: under ``text_config`` with tensors prefixed ``language_model.``).
Routed experts are compressed-tensors ``pack-quantized`` int4 (group 32, symmetric); everything
else (attention, router, shared experts, dense layer 0, embeddings, lm_head) is bf16. Shards
are written by the ``safetensors`` library itself, with a ``model.safetensors.index.json``.
"""

from __future__ import annotations

import copy
import json
import textwrap
from pathlib import Path
from typing import Literal

import torch
from safetensors.torch import save_file

from chord_kernels.formats import random_quantized
from chord_pack.errors import ChordPackError, OutputError
from chord_pack.names import PACKED_PROJECTIONS, SOURCE_PROJECTIONS, expert_name, expert_nk

Style = Literal["k2-thinking", "k2.5"]

KIMI_INT4_QUANTIZATION_CONFIG: dict = {
    "config_groups": {
        "group_0": {
            "input_activations": None,
            "output_activations": None,
            "targets": ["Linear"],
            "weights": {
                "actorder": None,
                "block_structure": None,
                "dynamic": False,
                "group_size": 32,
                "num_bits": 4,
                "observer": "minmax",
                "observer_kwargs": {},
                "strategy": "group",
                "symmetric": True,
                "type": "int",
            },
        }
    },
    "format": "pack-quantized",
    "ignore": [
        "lm_head",
        "re:.*self_attn.*",
        "re:.*shared_experts.*",
        "re:.*mlp\\.(gate|up|gate_up|down)_proj.*",
    ],
    "kv_cache_scheme": None,
    "quant_method": "compressed-tensors",
    "quantization_status": "compressed",
}
"""Kimi-K2-Thinking's ``quantization_config``, verbatim."""

def kimi_config(style: Style, *, layers: int, experts: int, hidden: int, intermediate: int,
                vocab: int = 256, top_k: int = 2) -> dict:
    """A Kimi config.json for ``layers`` MoE layers after one dense layer 0."""
    text = {
        "architectures": ["DeepseekV3ForCausalLM"],
        "auto_map": {
            "AutoConfig": "configuration_deepseek.DeepseekV3Config",
            "AutoModel": "modeling_deepseek.DeepseekV3Model",
            "AutoModelForCausalLM": "modeling_deepseek.DeepseekV3ForCausalLM",
        },
        "model_type": "kimi_k2",
        "hidden_size": hidden,
        "intermediate_size": 2 * intermediate,
        "moe_intermediate_size": intermediate,
        "num_hidden_layers": layers + 1,
        "first_k_dense_replace": 1,
        "moe_layer_freq": 1,
        "n_routed_experts": experts,
        "n_shared_experts": 1,
        "num_experts_per_tok": top_k,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "q_lora_rank": 32,
        "kv_lora_rank": 32,
        "qk_nope_head_dim": 16,
        "qk_rope_head_dim": 16,
        "v_head_dim": 16,
        "n_group": 1,
        "topk_group": 1,
        "topk_method": "noaux_tc",
        "scoring_func": "sigmoid",
        "norm_topk_prob": True,
        "routed_scaling_factor": 2.827,
        "vocab_size": vocab,
        "rms_norm_eps": 1e-05,
        "torch_dtype": "bfloat16",
        "tie_word_embeddings": False,
        "quantization_config": copy.deepcopy(KIMI_INT4_QUANTIZATION_CONFIG),
    }
    if style == "k2-thinking":
        return text
    if style != "k2.5":
        raise ValueError(f"style: expected 'k2-thinking' or 'k2.5', got {style!r}")
    text["model_type"] = "deepseek_v3"
    text.pop("auto_map")
    text["quantization_config"]["ignore"] += ["re:.*vision_tower.*", "re:.*mm_projector.*"]
    return {
        "architectures": ["KimiK25ForConditionalGeneration"],
        "auto_map": {
            "AutoConfig": "configuration_kimi_k25.KimiK25Config",
            "AutoModel": "modeling_kimi_k25.KimiK25ForConditionalGeneration",
        },
        "model_type": "kimi_k25",
        "media_placeholder_token_id": 163605,
        "text_config": text,
        "vision_config": {"model_type": "moonvit", "hidden_size": 32, "num_hidden_layers": 1},
        "torch_dtype": "bfloat16",
    }


def kimi_tensors(style: Style, *, layers: int, experts: int, hidden: int, intermediate: int,
                 vocab: int = 256, seed: int = 0) -> dict[str, torch.Tensor]:
    """Every tensor of the tiny checkpoint, with fresh random values from ``seed``."""
    g = torch.Generator().manual_seed(seed)
    prefix = "language_model." if style == "k2.5" else ""

    def bf16(*shape: int) -> torch.Tensor:
        return (torch.randn(*shape, generator=g) * 0.05).to(torch.bfloat16)

    t: dict[str, torch.Tensor] = {}
    if style == "k2.5":
        t["vision_tower.patch_embed.proj.weight"] = bf16(32, 3, 2, 2)
        t["mm_projector.linear_1.weight"] = bf16(hidden, 32)
    t[f"{prefix}model.embed_tokens.weight"] = bf16(vocab, hidden)
    for layer in range(layers + 1):
        p = f"{prefix}model.layers.{layer}."
        t[p + "input_layernorm.weight"] = bf16(hidden)
        t[p + "post_attention_layernorm.weight"] = bf16(hidden)
        t[p + "self_attn.q_a_proj.weight"] = bf16(32, hidden)
        t[p + "self_attn.q_a_layernorm.weight"] = bf16(32)
        t[p + "self_attn.q_b_proj.weight"] = bf16(2 * 32, 32)
        t[p + "self_attn.kv_a_proj_with_mqa.weight"] = bf16(32 + 16, hidden)
        t[p + "self_attn.kv_a_layernorm.weight"] = bf16(32)
        t[p + "self_attn.kv_b_proj.weight"] = bf16(2 * 32, 32)
        t[p + "self_attn.o_proj.weight"] = bf16(hidden, 32)
        if layer == 0:  # dense layer (first_k_dense_replace = 1), bf16
            t[p + "mlp.gate_proj.weight"] = bf16(2 * intermediate, hidden)
            t[p + "mlp.up_proj.weight"] = bf16(2 * intermediate, hidden)
            t[p + "mlp.down_proj.weight"] = bf16(hidden, 2 * intermediate)
            continue
        t[p + "mlp.gate.weight"] = bf16(experts, hidden)
        t[p + "mlp.gate.e_score_correction_bias"] = torch.randn(experts, generator=g)
        for proj in SOURCE_PROJECTIONS:
            t[p + f"mlp.shared_experts.{proj}.weight"] = bf16(*expert_nk(proj, hidden, intermediate))
        for e in range(experts):
            for proj in SOURCE_PROJECTIONS:
                n, k = expert_nk(proj, hidden, intermediate)
                packed, scales = random_quantized(n, k, generator=g)
                t[expert_name(prefix, layer, e, proj, "weight_packed")] = packed
                t[expert_name(prefix, layer, e, proj, "weight_scale")] = scales
                t[expert_name(prefix, layer, e, proj, "weight_shape")] = torch.tensor([n, k], dtype=torch.int32)
    t[f"{prefix}model.norm.weight"] = bf16(hidden)
    t[f"{prefix}lm_head.weight"] = bf16(vocab, hidden)
    return t


def write_checkpoint(path: str | Path, config: dict, tensors: dict[str, torch.Tensor], *,
                     shards: int = 2) -> Path:
    """Write ``config.json``, ``shards`` safetensors files and ``model.safetensors.index.json``.

    Tensors are dealt out to shards in order by size, as ``save_pretrained`` would.
    """
    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    per_shard = -(-total // shards)
    groups: list[dict[str, torch.Tensor]] = [{}]
    size = 0
    for name, tensor in tensors.items():
        nbytes = tensor.numel() * tensor.element_size()
        if size and size + nbytes > per_shard and len(groups) < shards:
            groups.append({})
            size = 0
        groups[-1][name] = tensor.contiguous()
        size += nbytes
    weight_map = {}
    for i, group in enumerate(groups, 1):
        fname = f"model-{i:05d}-of-{len(groups):05d}.safetensors"
        save_file(group, str(root / fname), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(group, fname))
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (root / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
    (root / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (root / "generation_config.json").write_text(json.dumps({"max_length": 262144}) + "\n")
    (root / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 262144}) + "\n")
    return root


def write_tiny_kimi_checkpoint(
    path: str | Path,
    style: Style = "k2-thinking",
    layers: int = 2,
    experts: int = 4,
    hidden: int = 256,
    intermediate: int = 128,
    seed: int = 0,
    *,
    shards: int = 2,
) -> Path:
    """Write a tiny Kimi checkpoint (``layers`` MoE layers after a dense layer 0) to ``path``.

    ``hidden`` and ``intermediate`` must be multiples of 32 (the quantization group).
    """
    for name, value in (("hidden", hidden), ("intermediate", intermediate)):
        if value <= 0 or value % 32:
            raise ValueError(f"{name}: expected a positive multiple of 32, got {value}")
    dims = {"layers": layers, "experts": experts, "hidden": hidden, "intermediate": intermediate}
    config = kimi_config(style, **dims)
    return write_checkpoint(path, config, kimi_tensors(style, **dims, seed=seed), shards=shards)


LAYOUT_MEANINGS = {
    "indexed": "the routed experts' INT4 codes and scales re-ordered into the tiles that Chord's indexed "
               "MoE kernel reads (64 channels x 256 K, one bulk copy each)",
    "contiguous": "the indexed layout's tiles recorded for Chord's grouped contiguous GEMM (rows grouped "
                  "by expert, prefill under expert parallelism), cut by expert range",
    "masked": "the indexed layout's tiles recorded for Chord's grouped masked GEMM (DeepEP low-latency "
              "buffers, decode under expert parallelism), cut by expert range",
    "reference": "the routed experts' INT4 codes and scales stacked per projection, as the pure-PyTorch "
                 "reference reads them",
}
PROFILE_MEANINGS = {
    "h200_ep8": "tuned for H200 GPUs serving with 8-way expert parallelism (decode)",
    "h200_tp8": "tuned for H200 GPUs serving with 8-way tensor parallelism (decode and prefill)",
    "b200_ep8": "for B200 GPUs with 8-way expert parallelism (compile-checked only)",
    "b300_ep8": "for B300 GPUs with 8-way expert parallelism (compile-checked only)",
}


def run_demo(workdir: str | Path, layout: str | None = None, profile: str | None = None,
             style: Style = "k2-thinking", seed: int = 0) -> dict:
    """Write a tiny Kimi checkpoint, convert it, verify it, and check the MoE output is unchanged.

    ``workdir`` must be empty or new. ``layout`` defaults to ``"indexed"`` when this chord-kernels
    has it, else ``"reference"``. Returns a summary (paths, shards, bytes, the max |output| and
    whether outputs were equal).
    """
    from chord_kernels.packed import available_layouts
    from chord_kernels.reference import moe_layer
    from chord_pack.convert import convert
    from chord_pack.load import read_packed
    from chord_pack.plan import layout_named
    from chord_pack.verify import verify

    if layout is None:
        layout = "indexed" if "indexed" in available_layouts() else "reference"
    # All checked before anything is written: a typo must not leave a directory the rerun refuses.
    if style not in ("k2-thinking", "k2.5"):
        raise ChordPackError(f"unknown demo style {style!r}; valid styles: k2-thinking, k2.5")
    target = layout_named(layout)
    if profile is not None and profile not in target.profiles:
        raise ChordPackError(f"layout {layout!r} has no profile {profile!r}; choose one of {list(target.profiles)}")
    root = Path(workdir)
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise OutputError(f"demo directory {root} is not empty; give a new or empty directory")
    dims = {"layers": 2, "experts": 8, "hidden": 256, "intermediate": 128}
    config = kimi_config(style, **dims)
    tensors = kimi_tensors(style, **dims, seed=seed)
    src = write_checkpoint(root / f"tiny-kimi-{style}", config, tensors, shards=2)
    out = root / f"tiny-kimi-{style}-chord-{layout}"
    result = convert(src, out, layout, profile, max_shard_bytes=1_000_000)
    report = verify(out).raise_if_failed()
    prefix = result.plan.info.prefix
    g = torch.Generator().manual_seed(seed + 1)
    tokens, e = 16, dims["experts"]
    hidden = (torch.randn(tokens, dims["hidden"], generator=g) * 0.5).to(torch.bfloat16)
    topk_ids = torch.stack([torch.randperm(e, generator=g)[:2] for _ in range(tokens)]).to(torch.int32)
    topk_weights = torch.rand(tokens, 2, generator=g).softmax(dim=-1)
    equal, peak = True, 0.0
    for layer in result.plan.info.moe_layers:
        def stacked(projs: tuple[str, ...], kind: str, layer: int = layer) -> torch.Tensor:
            return torch.stack([torch.cat([tensors[expert_name(prefix, layer, i, p, kind)] for p in projs])
                                for i in range(e)])
        w13_src, w2_src = ((stacked(projs, "weight_packed"), stacked(projs, "weight_scale"))
                           for projs in PACKED_PROJECTIONS.values())
        want = moe_layer(hidden, w13_src, w2_src, topk_weights, topk_ids)
        got = moe_layer(hidden, read_packed(out, layer, "w13"), read_packed(out, layer, "w2"),
                        topk_weights, topk_ids)
        equal &= bool(torch.equal(want, got))
        peak = max(peak, float(want.abs().max()))
    return {
        "source": str(src), "output": str(out), "layout": result.plan.layout,
        "profile": result.plan.profile, "family": result.plan.info.family,
        "shards": len(result.shards), "bytes": result.plan.total_bytes,
        "memory_bound": result.plan.memory_bound, "verified_experts": report.experts_compared,
        "moe_output_equal": equal, "moe_output_max_abs": peak,
        "moe_layers": list(result.plan.info.moe_layers), "experts": e,
    }


def explain(summary: dict, *, kept: bool, keep_hint: str = "") -> list[str]:
    """What the demo just did and what to run next, for someone who has never used Chord.

    Prose is wrapped to 78 columns; a path or a command stands whole on its own line. ``kept``
    says whether the demo's directory stays; if not, ``keep_hint`` says how to keep it.
    """
    layout, profile = summary["layout"], summary["profile"]

    def para(text: str, indent: str = "") -> list[str]:
        return textwrap.wrap(text, 78, initial_indent=indent, subsequent_indent=indent + "  ")

    lines = [
        *para(f"What you saw: a tiny checkpoint in the exact {summary['family']} INT4 format "
              f"({len(summary['moe_layers'])} MoE layers x {summary['experts']} experts) was converted and "
              "verified, and the MoE layer gave bit-identical output from the source and from the converted "
              "weights."),
        f"'{layout} / {profile}' is the layout and the profile of the conversion:",
        *para(f"layout {layout}: {LAYOUT_MEANINGS.get(layout, 'a chord-kernels layout')};", "  "),
        *para(f"profile {profile}: "
              f"{PROFILE_MEANINGS.get(profile, 'the hardware and parallelism the weights were packed for')}.",
              "  "),
        "  The numbers are unchanged, only their order.",
    ]
    if kept:
        lines += ["The converted checkpoint is kept in", f"  {summary['output']}",
                  "and its source in", f"  {summary['source']}"]
    else:
        lines += para(f"The checkpoints were written to a temporary directory, now deleted; {keep_hint}.")
    return [
        *lines,
        "Next, on a real checkpoint (about 570 GB to download and to write):",
        "  chord-pack inspect moonshotai/Kimi-K2-Thinking",
        "  chord-pack convert moonshotai/Kimi-K2-Thinking --layout indexed --profile h200_ep8 \\",
        "      --output Kimi-K2-Thinking-chord-indexed",
        "  chord-pack verify Kimi-K2-Thinking-chord-indexed",
        "The tests: nox -s tests (or pytest -q in packages/chord-pack).",
    ]
