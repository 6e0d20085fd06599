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


LAYOUT_USES = {
    "indexed": "chord-kernels' indexed MoE GEMM (`chord_kernels.indexed`, vLLM's routing tensors) reads "
               "these tiles",
    "contiguous": "these are the indexed layout's tiles under the grouped family's record (mode "
                  "`contiguous`); `chord_kernels.grouped.contiguous` runs them on rows already grouped by "
                  "expert (prefill under expert parallelism)",
    "masked": "these are the indexed layout's tiles under the grouped family's record (mode `masked`); "
              "`chord_kernels.grouped.masked` runs them on DeepEP low-latency `[G, max_m, K]` buffers "
              "(decode under expert parallelism)",
}
"""What reads each layout, for the card (a layout not listed is described by its record only)."""


VLLM_LAYOUTS = ("indexed", "contiguous", "masked")
"""Layouts chord-vllm serves (all hold the indexed tiles' bytes), in either schema."""


def _serving(plan: Plan) -> str:
    """Which loaders take this checkpoint today, truthfully."""
    if plan.layout not in VLLM_LAYOUTS:
        return ("chord-vllm does not load it (it loads the `indexed`, `contiguous` and `masked` layouts); "
                "read it through the chord-kernels Python API")
    reads = ("an expert-parallel rank reads only the expert ranges holding its experts"
             if plan.expert_ranges is not None else "every rank reads each whole tensor")
    return (f"vLLM with the chord-vllm plugin serves this checkpoint as it is, on Chord's indexed "
            f"kernels ({reads}, and each rank keeps its experts and TP slice)")


def model_card(plan: Plan) -> ModelCard:
    """A card recording what was converted, how, and how to load and check it."""
    from huggingface_hub import ModelCard, ModelCardData

    src = plan.source
    block = plan.static_block()
    inherited = _source_card_data(src.path)
    data = ModelCardData(
        base_model=src.repo_id,
        base_model_relation="quantized" if src.repo_id else None,
        tags=["chord", "chord-pack", "int4", "w4a16", "moe", f"layout-{plan.layout}"],
        **inherited,
    )
    origin = f"[{src.repo_id}](https://huggingface.co/{src.repo_id})" if src.repo_id else f"a local copy (`{src.path.name}`)"
    revision = f" at revision `{src.revision}`" if src.revision else ""
    use = LAYOUT_USES.get(plan.layout, f"chord-kernels' {block['family']} family reads them")
    if plan.expert_ranges is None:
        names = "named `...mlp.experts.chord.{w13,w2}.*`, one tensor per projection holding all experts"
    else:
        per = len(plan.expert_ranges[0])
        names = (f"cut by expert range, `...mlp.experts.chord.{{w13,w2}}.experts_{{first}}_{{last}}.*` "
                 f"({per} expert{'' if per == 1 else 's'} each), so that an expert-parallel rank reads only its own experts")
    body = f"""
# {src.repo_id.split('/')[-1] if src.repo_id else src.path.name} — Chord {plan.layout} ({plan.profile})

This is {origin}{revision} ({plan.info.description}) with its routed-expert INT4 weights
pre-permuted by chord-pack into the chord-kernels **{plan.layout}** layout (family `{block['family']}`,
mode `{block['mode']}`, layout version {block['layout_version']}, chord-kernels
{block['chord_kernels_version']}) for profile **{plan.profile}**: {use}. The numbers are unchanged:
every expert unpacks to exactly the source codes and scales (int4, group 32, symmetric).
Attention, router, shared experts, dense layers, embeddings and lm_head are byte-identical copies.

The quantization format is marked `chord-packed`, not `pack-quantized`, and the packed experts
are {names}: a loader that does not know Chord stops with an error instead of reading permuted
tensors as if they were the source format. As of chord-pack {__version__}, {_serving(plan)}:
`chord_pack.load.read_packed(path, layer, "w13")` gives a layer's packed experts as a
`chord_kernels.PackedWeight`. The `chord_pack` block in `config.json` (schema version
{block['schema_version']}) records the layout, family, mode, profile, versions, source and the
sha256 of every shard; every shard header carries the same block (minus the hashes).

Check a download before use:

```bash
chord-pack verify .
```
"""
    return ModelCard(f"---\n{data.to_yaml()}\n---\n{body}")
