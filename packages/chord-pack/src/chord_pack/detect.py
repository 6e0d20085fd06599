"""What a checkpoint is: model family, where its quantization config sits, tensor prefix, experts.

chord-pack converts exactly one source scheme: compressed-tensors ``pack-quantized`` int4 weights,
group 32, symmetric, weight-only (W4A16), as Moonshot ships Kimi K2-Thinking (``quantization_config``
at the top of config.json) and K2.5/K2.6 (under ``text_config``, tensors prefixed
``language_model.``). Anything else is refused with a message naming what was found.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from chord_pack.errors import CheckpointError, UnsupportedCheckpointError
from chord_pack.names import EXPERT_KINDS, EXPERT_RE

SOURCE_FORMAT = "pack-quantized"
CHORD_FORMAT = "chord-packed"
"""The format marker written into converted checkpoints (never ``pack-quantized``)."""

REQUIRED_WEIGHT_ARGS = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 32,
                        "symmetric": True}
SERVED_CHECKPOINTS = ("moonshotai/Kimi-K2-Thinking", "moonshotai/Kimi-K2.5", "moonshotai/Kimi-K2.6")
"""The INT4 checkpoints Chord serves (what a refusal points the user to)."""


@dataclass(frozen=True)
class ModelInfo:
    """The facts chord-pack needs about a source checkpoint."""

    family: str
    """``"kimi-k2-thinking"``, ``"kimi-k2.5"`` or ``"model_type=<...>"`` for other DeepSeek-V3-style MoEs."""
    description: str
    model_type: str
    quant_config_path: tuple[str, ...]
    """Keys leading to quantization_config in config.json, e.g. ``("text_config", "quantization_config")``."""
    prefix: str
    """Tensor-name prefix before ``model.layers`` (``""`` or ``"language_model."``)."""
    moe_layers: tuple[int, ...]
    num_experts: int
    hidden_size: int | None
    moe_intermediate_size: int | None
    scheme: dict = field(default_factory=dict)


def load_json(path: Path) -> dict:
    """The JSON object in ``path``; a missing, unreadable or non-object file is a CheckpointError."""
    try:
        doc = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise CheckpointError(f"{path}: file not found") from None
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    except ValueError as exc:  # not JSON, or not UTF-8
        raise CheckpointError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(doc, dict):
        raise CheckpointError(f"{path}: expected a JSON object, found a {type(doc).__name__}")
    return doc


def weight_map_of(index: dict, path: Path) -> dict[str, str]:
    """The ``weight_map`` of ``index`` (read from ``path``; empty if it has none), checked."""
    weight_map = index.get("weight_map") or {}
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise CheckpointError(f"{path}: weight_map must map tensor names to file names, found {weight_map!r:.100}")
    return weight_map


def quantization_config(config: dict) -> tuple[dict | None, tuple[str, ...]]:
    """The quantization_config and the keys that lead to it (top level, then ``text_config``)."""
    if isinstance(config.get("quantization_config"), dict):
        return config["quantization_config"], ("quantization_config",)
    text = config.get("text_config")
    if isinstance(text, dict) and isinstance(text.get("quantization_config"), dict):
        return text["quantization_config"], ("text_config", "quantization_config")
    return None, ()


def check_scheme(qc: dict | None, where: str) -> dict:
    """Refuse anything but int4 / group-32 / symmetric / weight-only ``pack-quantized``."""
    if qc is None:
        raise UnsupportedCheckpointError(
            "config.json has no quantization_config (looked at the top level and under "
            "text_config): found an unquantized checkpoint, chord-pack needs int4 pack-quantized"
        )
    method = qc.get("quant_method")
    if method != "compressed-tensors":
        raise UnsupportedCheckpointError(
            f"{where}.quant_method: expected 'compressed-tensors', found {method!r}"
        )
    status = qc.get("quantization_status", "compressed")
    if status != "compressed":
        raise UnsupportedCheckpointError(
            f"{where}.quantization_status: expected 'compressed', found {status!r}"
        )
    groups = qc.get("config_groups") or {}
    if not isinstance(groups, dict) or not groups:
        raise UnsupportedCheckpointError(f"{where}.config_groups: expected an object of groups, found {groups!r:.100}")
    for gname, group in groups.items():
        if not isinstance(group, dict) or not isinstance(group.get("weights") or {}, dict):
            raise UnsupportedCheckpointError(
                f"{where}.config_groups.{gname}: expected an object with an object 'weights', found {group!r:.100}")
        fmt = group.get("format") or qc.get("format")
        if fmt != SOURCE_FORMAT:
            raise UnsupportedCheckpointError(
                f"{where} group {gname}: expected format {SOURCE_FORMAT!r}, found {fmt!r}"
            )
        weights = group.get("weights") or {}
        found = {k: weights.get(k) for k in REQUIRED_WEIGHT_ARGS}
        if found != REQUIRED_WEIGHT_ARGS:
            raise UnsupportedCheckpointError(
                f"{where} group {gname}: expected weights {REQUIRED_WEIGHT_ARGS} "
                f"(int4, group 32, symmetric), found {found}"
            )
        if weights.get("dynamic"):
            raise UnsupportedCheckpointError(f"{where} group {gname}: dynamic weight quantization is not supported")
        if weights.get("actorder") not in (None, "static"):
            raise UnsupportedCheckpointError(
                f"{where} group {gname}: activation-order {weights.get('actorder')!r} needs g_idx; "
                "expected actorder null"
            )
        if group.get("input_activations"):
            raise UnsupportedCheckpointError(
                f"{where} group {gname}: expected weight-only (W4A16) quantization, found "
                f"input_activations {group['input_activations']}"
            )
    return {"format": SOURCE_FORMAT, **REQUIRED_WEIGHT_ARGS, "groups": sorted(groups)}


def detect(config: dict, weight_map: dict[str, str]) -> ModelInfo:
    """Identify the checkpoint described by ``config`` and its index ``weight_map``."""
    qc, path = quantization_config(config)
    where = ".".join(path) or "quantization_config"
    if config.get("chord_pack") or (qc or {}).get("format") == CHORD_FORMAT:
        raise UnsupportedCheckpointError(
            f"config.json has a chord_pack block or {where}.format {CHORD_FORMAT!r}: "
            "this checkpoint was already converted by chord-pack"
        )
    try:
        scheme = check_scheme(qc, where)
    except UnsupportedCheckpointError as exc:
        fp8 = (qc or {}).get("quant_method") == "fp8"
        what = "this is an FP8 checkpoint (such as moonshotai/Kimi-K2-Instruct); " if fp8 else ""
        raise UnsupportedCheckpointError(
            f"{exc}. {what}chord-pack converts the INT4 checkpoints Chord serves: {', '.join(SERVED_CHECKPOINTS)}"
        ) from None
    text = config.get("text_config") if path[0] == "text_config" else config
    model_type = str(config.get("model_type", "unknown"))
    if path[0] == "text_config":
        kimi, family, label = model_type.startswith("kimi_k25"), "kimi-k2.5", "Kimi K2.5/K2.6"
        qc_at = "quantization_config under text_config"
    else:
        kimi, family, label = model_type in ("kimi_k2", "deepseek_v3"), "kimi-k2-thinking", "Kimi K2-Thinking"
        qc_at = "top-level quantization_config"
    if not kimi:  # laid out like Kimi, but not one: say what it claims to be, not what it resembles
        family, label = f"model_type={model_type}", f"a Kimi-format checkpoint of model_type {model_type!r}"
    description = f"{label} ({qc_at})"
    for key in ("n_routed_experts", "hidden_size", "moe_intermediate_size"):
        value = text.get(key)
        if value is not None and (type(value) is not int or value <= 0):
            raise CheckpointError(f"config.json {'text_config.' if text is not config else ''}{key}: expected a "
                                  f"positive integer, found {value!r}")

    prefixes: set[str] = set()
    experts: dict[int, set[int]] = defaultdict(set)
    for name in weight_map:
        m = EXPERT_RE.match(name)
        if m:
            if m["kind"] not in EXPERT_KINDS:
                raise UnsupportedCheckpointError(
                    f"tensor {name} ({weight_map[name]}): found {m['kind']}, which only asymmetric or "
                    "activation-ordered checkpoints carry; expected weight_packed/weight_scale/weight_shape"
                )
            prefixes.add(m["prefix"])
            experts[int(m["layer"])].add(int(m["expert"]))
    if not experts:
        sample = ", ".join(sorted(weight_map)[:3])
        raise UnsupportedCheckpointError(
            "no routed-expert tensors named <prefix>model.layers.<L>.mlp.experts.<E>."
            f"{{gate,up,down}}_proj.weight_packed in the index ({len(weight_map)} tensors, e.g. {sample})"
        )
    if len(prefixes) > 1:
        raise CheckpointError(f"expert tensors use several name prefixes: {sorted(prefixes)}")
    prefix = prefixes.pop()
    counts = {layer: len(ids) for layer, ids in experts.items()}
    num_experts = max(counts.values())
    for layer, ids in sorted(experts.items()):
        if ids != set(range(num_experts)):
            missing = sorted(set(range(num_experts)) - ids)[:5]
            raise CheckpointError(
                f"layer {layer}: expected experts 0..{num_experts - 1} in the index, "
                f"missing {missing}{'...' if len(missing) == 5 else ''}"
            )
    declared = text.get("n_routed_experts")
    if declared is not None and declared != num_experts:
        raise CheckpointError(
            f"config.json declares n_routed_experts={declared} but the index has {num_experts} experts per layer"
        )
    return ModelInfo(
        family=family, description=description, model_type=model_type, quant_config_path=path,
        prefix=prefix, moe_layers=tuple(sorted(experts)), num_experts=num_experts,
        hidden_size=text.get("hidden_size"), moe_intermediate_size=text.get("moe_intermediate_size"), scheme=scheme,
    )
