"""``chord-pack inspect``: what a checkpoint is, from config.json, the index and shard headers.

A local checkpoint's shards are all checked (present, and long enough for every tensor their
header lists): a damaged checkpoint is an error here, as it is for ``convert``.
"""

from __future__ import annotations

from chord_pack.detect import detect, load_json, weight_map_of
from chord_pack.errors import CheckpointError
from chord_pack.names import EXPERT_RE, SOURCE_PROJECTIONS, expert_nk
from chord_pack.progress import Progress
from chord_pack.source import INDEX_NAME, Source, resolve
from chord_pack.st import Header, read_header


def _local_headers(source: Source, weight_map: dict[str, str], block: dict | None) -> dict[str, Header]:
    """Headers of every shard of a local checkpoint; a missing, truncated or short shard fails."""
    headers = {}
    for fname in sorted(set(weight_map.values())):
        path = source.path / fname
        if not path.is_file():
            raise CheckpointError(f"{path}: listed in {INDEX_NAME} but missing")
        headers[fname] = read_header(path)
        want = ((block or {}).get("shards") or {}).get(fname, {}).get("size")
        if want is not None and headers[fname].file_size != want:
            raise CheckpointError(f"{path}: {headers[fname].file_size} bytes, config.json records {want} (truncated?)")
    for name, fname in weight_map.items():
        if name not in headers[fname].tensors:
            raise CheckpointError(f"{source.path / fname}: tensor {name} is in {INDEX_NAME} but not in the file")
    for fname, header in headers.items():  # a loader that goes by the index would never see such a tensor
        if lacking := [name for name in header.tensors if name not in weight_map]:
            raise CheckpointError(f"{source.path / fname}: tensor {lacking[0]} is in the file but {INDEX_NAME} "
                                  f"lacks it ({len(lacking)} such tensors)")
    return headers


def describe(src: str, revision: str | None = None, progress: Progress | None = None) -> dict:
    """Facts about SRC; for a Hub repo only config.json and the index are downloaded."""
    source = resolve(src, revision, metadata_only=True, progress=progress)
    config = load_json(source.path / "config.json")
    index = load_json(source.path / INDEX_NAME)
    weight_map = weight_map_of(index, source.path / INDEX_NAME)
    block = config.get("chord_pack")
    local = source.repo_id is None or all((source.path / f).is_file() for f in set(weight_map.values()))
    headers = _local_headers(source, weight_map, block if isinstance(block, dict) else None) if local else {}
    facts: dict = {"source": source.describe(), "tensors": len(weight_map),
                   "shards": len(set(weight_map.values()))}
    if isinstance(block, dict):  # already converted: show what it was converted to
        ranges = block.get("expert_ranges")
        facts.update({
            "format": block.get("format"), "schema_version": block.get("schema_version"),
            "layout": block.get("layout"), "family": block.get("family"), "mode": block.get("mode"),
            "profile": block.get("profile"), "layout_version": block.get("layout_version"),
            "chord_kernels_version": block.get("chord_kernels_version"),
            "converted_from": block.get("source"), "moe_layers": len(block.get("moe_layers", [])),
            "experts": block.get("num_experts"),
            "experts_per_tensor": (f"{ranges[0][1] - ranges[0][0] + 1} ({len(ranges)} expert ranges per projection)"
                                   if ranges else f"{block.get('num_experts')} (all experts)"),
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
            shapes = {p: list(expert_nk(p, info.hidden_size, info.moe_intermediate_size)) for p in SOURCE_PROJECTIONS}
        first = info.moe_layers[0]
        for name, fname in weight_map.items():
            m = EXPERT_RE.match(name)
            if m and fname in headers and int(m["layer"]) == first and m["expert"] == "0" \
                    and m["kind"] == "weight_packed":
                t = headers[fname].tensors[name]
                shapes[m["proj"]] = [t.shape[0], t.shape[1] * 8]
        facts["expert_shapes [N, K]"] = shapes
    total = (index.get("metadata") or {}).get("total_size")
    if total is not None:
        facts["size"] = f"{int(total) / 1e9:.3f} GB" if int(total) >= 10**8 else f"{int(total) / 1e6:.3f} MB"
    return facts
