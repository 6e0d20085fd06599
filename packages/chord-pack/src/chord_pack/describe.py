"""``chord-pack inspect``: what a checkpoint is, from config.json, the index and shard headers."""

from __future__ import annotations

from chord_pack.detect import EXPERT_RE, detect, load_json
from chord_pack.source import INDEX_NAME, resolve
from chord_pack.st import read_header


def describe(src: str, revision: str | None = None) -> dict:
    """Facts about SRC; for a Hub repo only config.json and the index are downloaded."""
    source = resolve(src, revision, metadata_only=True)
    config = load_json(source.path / "config.json")
    index = load_json(source.path / INDEX_NAME)
    weight_map: dict[str, str] = index.get("weight_map") or {}
    facts: dict = {"source": source.describe(), "tensors": len(weight_map),
                   "shards": len(set(weight_map.values()))}
    block = config.get("chord_pack")
    if isinstance(block, dict):  # already converted: show what it was converted to
        facts.update({
            "format": block.get("format"), "layout": block.get("layout"), "profile": block.get("profile"),
            "layout_version": block.get("layout_version"),
            "chord_kernels_version": block.get("chord_kernels_version"),
            "converted_from": block.get("source"), "moe_layers": len(block.get("moe_layers", [])),
            "experts": block.get("num_experts"),
            "projections": {k: [v["n"], v["k"]] for k, v in block.get("projections", {}).items()},
        })
    else:
        info = detect(config, weight_map)
        facts.update({
            "family": info.family, "description": info.description, "model_type": info.model_type,
            "quantization": f"{'.'.join(info.quant_config_path)}: compressed-tensors pack-quantized int4, "
                            "group 32, symmetric, weight-only",
            "tensor_prefix": info.prefix or "(none)",
            "moe_layers": f"{len(info.moe_layers)} (layers {info.moe_layers[0]}..{info.moe_layers[-1]})",
            "experts": info.num_experts,
        })
        shapes = {}
        if info.hidden_size and info.moe_intermediate_size:
            h, i = info.hidden_size, info.moe_intermediate_size
            shapes = {"gate_proj": [i, h], "up_proj": [i, h], "down_proj": [h, i]}
        first = info.moe_layers[0]
        local = {fname for fname in set(weight_map.values()) if (source.path / fname).is_file()}
        for name, fname in weight_map.items():
            m = EXPERT_RE.match(name)
            if m and fname in local and int(m["layer"]) == first and m["expert"] == "0" \
                    and m["kind"] == "weight_packed":
                t = read_header(source.path / fname).tensors[name]
                shapes[m["proj"]] = [t.shape[0], t.shape[1] * 8]
        facts["expert_shapes [N, K]"] = shapes
    total = (index.get("metadata") or {}).get("total_size")
    if total is not None:
        facts["size"] = f"{int(total) / 1e9:.3f} GB" if int(total) >= 10**8 else f"{int(total) / 1e6:.3f} MB"
    return facts
