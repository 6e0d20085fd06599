"""``ChordCompressedTensorsConfig``: vLLM's compressed-tensors config with Chord for MoE experts.

Registered under the name ``"compressed-tensors"``, so Kimi K2.x checkpoints need no flag, every
``isinstance(..., CompressedTensorsConfig)`` check (Kimi K2.5's vision tower) still holds, and every
non-MoE layer keeps vLLM's own method.
"""

from __future__ import annotations

import torch
from vllm.model_executor.layers.fused_moe import RoutedExperts
from vllm.model_executor.layers.quantization.base_config import QuantizeMethodBase
from vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors import (
    CompressedTensorsConfig,
)
from vllm.model_executor.models.utils import WeightsMapper

from chord_vllm import packed_ckpt
from chord_vllm.decision import PACKED_FORMAT, decide
from chord_vllm.method import ChordWNA16MoEMethod


class ChordCompressedTensorsConfig(CompressedTensorsConfig):
    """compressed-tensors, with int4 group-32 symmetric MoE experts on Chord kernels."""

    chord_pack: dict[str, packed_ckpt.Projection] | None = None
    """The checkpoint's chord-pack projections (from config.json) when it is a chord-pack output."""

    def maybe_update_config(self, model_name: str, hf_config=None, revision: str | None = None) -> None:
        super().maybe_update_config(model_name, hf_config=hf_config, revision=revision)
        block = getattr(hf_config, "chord_pack", None)
        if self.quant_format != PACKED_FORMAT:
            return
        if block is None:
            raise ValueError(f"{model_name}/config.json: quantization format is {PACKED_FORMAT!r} but "
                             "there is no chord_pack block; the checkpoint is incomplete")
        self.chord_pack = packed_ckpt.read_block(block, f"{model_name}/config.json")

    def get_quant_method(self, layer: torch.nn.Module, prefix: str) -> QuantizeMethodBase | None:
        if not isinstance(layer, RoutedExperts):
            return super().get_quant_method(layer, prefix)
        self._add_fused_moe_to_target_scheme_map()
        names = (layer.ckpt_gate_proj_name, layer.ckpt_up_proj_name, layer.ckpt_down_proj_name)
        schemes = [self.get_scheme_dict(layer, f"{prefix}.0.{name}") for name in names]
        chord_packed = schemes[0] is not None and schemes[0].get("format") == PACKED_FORMAT
        if chord_packed and self.chord_pack is None:
            raise ValueError(f"{prefix}: the checkpoint is {PACKED_FORMAT!r} but its chord_pack block "
                             "was not read (maybe_update_config did not run)")
        decision = decide(layer, schemes)
        if decision.use_chord:
            return ChordWNA16MoEMethod(schemes[0]["weights"], layer.moe_config, prefix=prefix,
                                       profile=decision.profile,
                                       packed=self.chord_pack if chord_packed else None)
        if chord_packed:
            raise ValueError(f"{prefix}: this chord-pack checkpoint holds its experts only in Chord's "
                             f"layout, which needs Chord, but {decision.reason}. Serve the source "
                             "checkpoint instead, or fix the above.")
        return super().get_quant_method(layer, prefix)

    def get_checkpoint_weight_mapper(self) -> WeightsMapper:
        mapper = super().get_checkpoint_weight_mapper()
        if self.quant_format != PACKED_FORMAT:
            return mapper
        return mapper | WeightsMapper(orig_to_new_regex={
            packed_ckpt.NAME_PATTERN: packed_ckpt.NAME_REPLACEMENT,
            packed_ckpt.RANGE_NAME_PATTERN: packed_ckpt.RANGE_NAME_REPLACEMENT})
