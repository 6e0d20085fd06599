"""The model card written next to a converted checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from chord_pack import __version__
from chord_pack.plan import Plan

if TYPE_CHECKING:
    from huggingface_hub import ModelCard


def _source_card_data(path: Path) -> dict:
    from huggingface_hub import ModelCard

    readme = path / "README.md"
    if not readme.is_file():
        return {}
    try:
        data = ModelCard.load(readme).data.to_dict()
    except Exception:  # a malformed source card must not stop a finished conversion
        return {}
    # The licence carries over; library_name does not (transformers cannot load these weights).
    return {k: data[k] for k in ("license", "license_name", "license_link") if k in data}


def model_card(plan: Plan) -> ModelCard:
    """A card recording what was converted, how, and how to load and check it."""
    from huggingface_hub import ModelCard, ModelCardData

    src = plan.source
    inherited = _source_card_data(src.path)
    data = ModelCardData(
        base_model=src.repo_id,
        base_model_relation="quantized" if src.repo_id else None,
        tags=["chord", "chord-pack", "int4", "w4a16", "moe", f"layout-{plan.layout}"],
        **inherited,
    )
    origin = f"[{src.repo_id}](https://huggingface.co/{src.repo_id})" if src.repo_id else f"a local copy (`{src.path.name}`)"
    revision = f" at revision `{src.revision}`" if src.revision else ""
    body = f"""
# {src.repo_id.split('/')[-1] if src.repo_id else src.path.name} — Chord {plan.layout} ({plan.profile})

This is {origin}{revision} ({plan.info.description}) with its routed-expert INT4 weights
pre-permuted by chord-pack into the chord-kernels **{plan.layout}** layout
for profile **{plan.profile}** (layout version {plan.static_block()["layout_version"]}, chord-kernels
{plan.static_block()["chord_kernels_version"]}). The numbers are unchanged: every expert unpacks to
exactly the source codes and scales (int4, group 32, symmetric). Attention, router, shared experts,
dense layers, embeddings and lm_head are byte-identical copies.

The quantization format is marked `chord-packed`, not `pack-quantized`, and the packed experts
are named `...mlp.experts.chord.{{w13,w2}}.*`: a loader that does not know Chord stops with an
error instead of reading permuted tensors as if they were the source format. As of chord-pack
{__version__}, these weights are read through the chord-kernels Python API
(`chord_pack.load.read_packed(path, layer, "w13")` gives a layer's packed experts) and checked with
`chord-pack verify`; a vLLM plugin (chord-vllm) is in development. The `chord_pack` block in
`config.json` records the layout, profile, versions, source and the sha256 of every shard; every
shard header carries the same block (minus the hashes).

Check a download before use:

```bash
chord-pack verify .
```
"""
    return ModelCard(f"---\n{data.to_yaml()}\n---\n{body}")
