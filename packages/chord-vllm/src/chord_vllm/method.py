"""``ChordWNA16MoEMethod``: the quantization method of a MoE layer Chord serves.

Original Kimi checkpoints (compressed-tensors ``pack-quantized``) load into exactly the parameters
vLLM's own compressed-tensors method creates, through vLLM's loader and its TP/EP sharding; after
loading they are packed into Chord's indexed layout on the GPU and the source tensors are freed.
chord-pack checkpoints load their tiles directly (:mod:`chord_vllm.packed_ckpt`), from one tensor
of all experts or from expert ranges, of which an EP rank reads only its own
(:mod:`chord_vllm.ep_filter`). Either way the
kernels are compiled and warmed before vLLM captures CUDA graphs.
"""

from __future__ import annotations

import logging

import torch
from compressed_tensors.quantization import QuantizationArgs
from vllm.config import get_current_vllm_config
from vllm.model_executor.layers.fused_moe import FusedMoEMethodBase, RoutedExperts, SharedExperts
from vllm.model_executor.layers.fused_moe import modular_kernel as mk
from vllm.model_executor.layers.fused_moe.all2all_utils import maybe_make_prepare_finalize
from vllm.model_executor.layers.fused_moe.config import (
    FusedMoEConfig,
    FusedMoEParallelConfig,
    FusedMoEQuantConfig,
    int4_w4a16_moe_quant_config,
)
from vllm.model_executor.utils import set_weight_attrs

import chord_kernels
from chord_kernels import PackedWeight
from chord_vllm import _compat, core, ep_filter, packed_ckpt
from chord_vllm.experts import ChordBatchedExperts, ChordIndexedExperts

PACK_CHUNK_BYTES = 128 << 20
"""Source bytes packed per step after loading; the transient is a few times this."""


class ChordWNA16MoEMethod(FusedMoEMethodBase):
    """int4 group-32 symmetric W4A16 experts on Chord kernels (see the module docstring)."""

    def __init__(self, weight_quant: QuantizationArgs, moe: FusedMoEConfig, *, prefix: str, profile: str,
                 packed: dict[str, packed_ckpt.Projection] | None):
        super().__init__(moe)
        self.weight_quant = weight_quant
        self.prefix = prefix
        self.profile = profile
        self.packed = packed
        """The checkpoint's projections when it is a chord-pack output, else None."""
        self.w13: PackedWeight | None = None
        self.w2: PackedWeight | None = None
        self._local_of_global: list[int] = []
        """Each global expert's local id on this rank (-1: another rank's), for chord-pack tiles."""
        self._loaded: dict[str, set[int]] = {}
        """Local experts whose chord-pack tiles arrived, per projection."""
        self._dummy_weights = False
        """``--load-format dummy``: no tiles arrive, and that is expected (read when the model is built)."""

    def maybe_roundup_sizes(self, hidden_size: int, intermediate_size_per_partition: int,
                            act_dtype: torch.dtype, moe_parallel_config: FusedMoEParallelConfig
                            ) -> tuple[int, int]:
        # The decision only takes deployments whose all2all pads nothing (Chord's tiles are not padded).
        return hidden_size, intermediate_size_per_partition

    def create_weights(self, layer: RoutedExperts, num_experts: int, hidden_size: int,
                       intermediate_size_per_partition: int, params_dtype: torch.dtype,
                       **extra_weight_attrs) -> None:
        if self.packed is not None:
            self._create_tiles(layer, num_experts, hidden_size, intermediate_size_per_partition)
            return
        # vLLM 0.33's compressed-tensors WNA16 parameters, N-first as in the checkpoint, so that
        # RoutedExperts.weight_loader shards them for TP and EP unchanged.
        extra_weight_attrs.update({"is_transposed": False, "quant_method": "group"})
        e, h, i = num_experts, hidden_size, intermediate_size_per_partition
        group = self.weight_quant.group_size
        shapes = {
            "w13_weight_packed": ((e, 2 * i, h // 8), torch.int32),
            "w2_weight_packed": ((e, h, i // 8), torch.int32),
            "w13_weight_scale": ((e, 2 * i, h // group), params_dtype),
            "w2_weight_scale": ((e, h, i // group), params_dtype),
            "w13_weight_shape": ((e, 2), torch.get_default_dtype()),
            "w2_weight_shape": ((e, 2), torch.get_default_dtype()),
        }
        for name, (shape, dtype) in shapes.items():
            param = torch.nn.Parameter(torch.empty(shape, dtype=dtype), requires_grad=False)
            layer.register_parameter(name, param)
            set_weight_attrs(param, extra_weight_attrs)
        layer.num_groups_w13, layer.num_groups_w2 = h // group, i // group
        layer.a13_scale = layer.a2_scale = None

    def _create_tiles(self, layer: RoutedExperts, num_experts: int, hidden_size: int,
                      intermediate_size_per_partition: int) -> None:
        assert self.packed is not None
        # vLLM builds the model under its config; the dummy loader later loads no integer tiles.
        self._dummy_weights = get_current_vllm_config().load_config.load_format == "dummy"
        moe = self.moe
        want = {"w13": (2 * moe.intermediate_size, hidden_size), "w2": (hidden_size, moe.intermediate_size)}
        self._local_of_global = [layer._map_global_expert_id_to_local_expert_id(g) for g in range(moe.num_experts)]
        local = packed_ckpt.expert_slices(moe.num_experts, self._local_of_global)
        self._loaded = {proj: set() for proj in self.packed}
        for proj, spec in self.packed.items():
            if (spec.num_experts, spec.n, spec.k) != (moe.num_experts, *want[proj]):
                raise ValueError(
                    f"{self.prefix}: the chord_pack block describes {proj} as [{spec.num_experts}, "
                    f"{spec.n}, {spec.k}], the model as [{moe.num_experts}, {want[proj][0]}, "
                    f"{want[proj][1]}]: config.json and the tensors disagree"
                )
            n, k = self._local_nk(proj)
            tiles = torch.empty(packed_ckpt.tiles_shape(num_experts, n, k, self.profile), dtype=torch.int32)
            param = torch.nn.Parameter(tiles, requires_grad=False)
            layer.register_parameter(packed_ckpt.param_name(proj), param)
            for experts in spec.ranges or (None,):
                if experts is not None:  # vLLM names no tensor to a loader: one parameter per range
                    param = torch.nn.Parameter(torch.empty(0, dtype=torch.int32), requires_grad=False)
                    layer.register_parameter(packed_ckpt.param_name(proj, experts), param)
                set_weight_attrs(param, {"weight_loader": self._tile_loader(layer, proj, spec, experts)})
        if any(spec.ranges for spec in self.packed.values()):
            ep_filter.expect(layer.layer_name, local)

    def _local_nk(self, proj: str) -> tuple[int, int]:
        i, h = self.moe.intermediate_size_per_partition, self.moe.hidden_dim
        return (2 * i, h) if proj == "w13" else (h, i)

    def _tile_loader(self, layer: RoutedExperts, proj: str, spec: packed_ckpt.Projection,
                     experts: range | None):
        """The loader of the tensor of ``experts`` (None: all): it writes the rank's experts among
        them, cut for TP, into the rank's tiles at their local ids; other ranks' experts are dropped."""
        span = range(spec.num_experts) if experts is None else experts

        def load(param: torch.nn.Parameter, loaded: torch.Tensor) -> None:
            mine = [(g, self._local_of_global[g]) for g in span if self._local_of_global[g] >= 0]
            if not mine:
                packed_ckpt.check_tiles(loaded, proj, spec, experts)
                return
            cut = packed_ckpt.rank_slice(loaded, proj, spec, local_experts=[g for g, _ in mine], experts=experts,
                                         tp_rank=self.moe.tp_rank, tp_size=self.moe.tp_size)
            tiles = getattr(layer, packed_ckpt.param_name(proj))
            ids = [lid for _, lid in mine]
            if cut.shape != (len(ids), *tiles.shape[1:]):
                raise ValueError(f"{self.prefix}: chord {proj} tiles for this rank are {list(cut.shape)}, "
                                 f"expected {[len(ids), *tiles.shape[1:]]}")
            tiles.data.index_copy_(0, torch.tensor(ids, device=tiles.device), cut.to(tiles.device))
            self._loaded[proj].update(ids)

        return load

    def process_weights_after_loading(self, layer: RoutedExperts) -> None:
        if self.packed is None:
            self.w13 = self._pack_source(layer, "w13")
            self.w2 = self._pack_source(layer, "w2")
        else:
            self.w13, self.w2 = (self._loaded_tiles(layer, p) for p in packed_ckpt.PROJECTIONS)
            self._drop_range_params(layer)
        layer.w13_weight = getattr(layer, packed_ckpt.param_name("w13"))
        layer.w2_weight = getattr(layer, packed_ckpt.param_name("w2"))
        self.moe_quant_config = self.get_fused_moe_quant_config(layer)
        prepare_finalize = maybe_make_prepare_finalize(
            moe=self.moe, quant_config=self.moe_quant_config,
            routing_tables=layer._expert_routing_tables(), allow_new_interface=True)
        if prepare_finalize is None:
            raise RuntimeError(f"{self.prefix}: vLLM built no prepare/finalize for "
                               f"{self.moe.moe_parallel_config}")
        experts = self._experts(prepare_finalize)
        device = self.w13.tensors["tiles"].device
        if device.type == "cuda":  # compile and warm before graph capture
            core.prepare(self.w13, self.w2, device, batched=isinstance(experts, ChordBatchedExperts))
        self.moe_kernel = mk.FusedMoEKernel(prepare_finalize, experts)
        _compat.log_once(logging.INFO, f"Chord serves the routed experts of {self.prefix} "
                                       f"({self.w13.num_experts} local experts, profile {self.profile}, "
                                       f"{type(experts).__name__}, {experts.backend.name}); further "
                                       "layers are not logged", key="serves")  # one line, not one per layer
        for proj, weight in (("w13", self.w13), ("w2", self.w2)):
            if not weight.small_scales:  # the kernels' one-fma dequantization needs every scale below 2^-5
                _compat.log_once(logging.INFO, f"Chord: {self.prefix} {proj} has a scale of 2^-5 or more (or an "
                                               "unreadable one); its GEMMs dequantize with the two-instruction "
                                               "form, a few per cent slower (docs/formats.md)")

    def _experts(self, prepare_finalize: mk.FusedMoEPrepareAndFinalize) -> ChordBatchedExperts | ChordIndexedExperts:
        """The experts for the activation format of vLLM's prepare/finalize."""
        if prepare_finalize.activation_format == mk.FusedMoEActivationFormat.BatchedExperts:
            return ChordBatchedExperts(self.moe, self.moe_quant_config,
                                       max_num_tokens=prepare_finalize.max_num_tokens_per_rank(),
                                       num_dispatchers=prepare_finalize.num_dispatchers(), w13=self.w13, w2=self.w2)
        return ChordIndexedExperts(self.moe, self.moe_quant_config, w13=self.w13, w2=self.w2)

    def _pack_source(self, layer: RoutedExperts, proj: str) -> PackedWeight:
        """Pack the loaded compressed-tensors weights experts-chunk by chunk into one tiles tensor,
        then free the source parameters."""
        packed, scales = getattr(layer, f"{proj}_weight_packed"), getattr(layer, f"{proj}_weight_scale")
        chord_kernels.formats.check_quantized(packed.data, scales.data, f"{self.prefix}.{proj}")
        e = packed.shape[0]
        per_expert = packed[0].nbytes + scales[0].nbytes
        step = max(1, PACK_CHUNK_BYTES // max(1, per_expert))
        tiles = first = None
        small_scales = True
        for e0 in range(0, e, step):
            part = chord_kernels.pack("indexed", packed.data[e0:e0 + step], scales.data[e0:e0 + step],
                                      profile=self.profile)
            small_scales = small_scales and part.small_scales
            if tiles is None:
                first = part
                tiles = torch.empty((e, *part.tensors["tiles"].shape[1:]), dtype=torch.int32,
                                    device=packed.device)
            tiles[e0:e0 + step].copy_(part.tensors["tiles"])
        assert first is not None and tiles is not None
        for suffix in ("weight_packed", "weight_scale", "weight_shape"):
            delattr(layer, f"{proj}_{suffix}")
        layer.register_parameter(packed_ckpt.param_name(proj), torch.nn.Parameter(tiles, requires_grad=False))
        return PackedWeight(layout=first.layout, family=first.family, mode=first.mode, profile=first.profile,
                            layout_version=first.layout_version, num_experts=e, n=first.n, k=first.k,
                            group_size=first.group_size, tensors={"tiles": tiles}, options=first.options,
                            small_scales=small_scales)

    def _loaded_tiles(self, layer: RoutedExperts, proj: str) -> PackedWeight:
        assert self.packed is not None
        spec = self.packed[proj]
        tiles = getattr(layer, packed_ckpt.param_name(proj)).data
        missing = sorted(g for g, lid in enumerate(self._local_of_global) if lid >= 0 and lid not in self._loaded[proj])
        # vLLM checks no quantized model for unloaded parameters: a layer absent from the checkpoint
        # (a missing shard) would otherwise serve uninitialized tiles.
        if missing and not self._dummy_weights:
            raise ValueError(f"{self.prefix}: chord {proj} tiles of local experts {missing} were never loaded: "
                             "the checkpoint lacks their tensors, or vLLM skipped reading them")
        if missing:
            _compat.log_once(logging.WARNING, f"Chord: --load-format dummy loads no chord tiles; the experts of "
                                              f"{self.prefix} and every other layer compute garbage", key="no tiles")
        if (spec.layout, spec.profile) != (packed_ckpt.LAYOUT, self.profile):
            held = "one tensor of all experts" if spec.ranges is None else f"{len(spec.ranges)} expert ranges"
            _compat.log_once(logging.INFO, f"Chord: the checkpoint was packed as layout {spec.layout}, profile "
                                           f"{spec.profile} ({held}); this deployment serves it as layout "
                                           f"{packed_ckpt.LAYOUT}, profile {self.profile} (same tile bytes)")
        n, k = self._local_nk(proj)
        return spec.weight(tiles, num_experts=tiles.shape[0], n=n, k=k, profile=self.profile)

    def _drop_range_params(self, layer: RoutedExperts) -> None:
        """The empty per-range parameters only routed tensors to loaders; the tiles hold the data."""
        assert self.packed is not None
        for proj, spec in self.packed.items():
            for experts in spec.ranges or ():
                delattr(layer, packed_ckpt.param_name(proj, experts))

    def get_fused_moe_quant_config(self, layer: RoutedExperts) -> FusedMoEQuantConfig:
        # Activations stay bf16 through every prepare; the scales live inside Chord's tiles.
        return int4_w4a16_moe_quant_config(w1_scale=None, w2_scale=None, block_shape=[0, 32])

    def apply(self, layer: RoutedExperts, x: torch.Tensor, topk_weights: torch.Tensor,
              topk_ids: torch.Tensor, shared_experts: SharedExperts | None,
              shared_experts_input: torch.Tensor | None) -> torch.Tensor:
        if self.moe_kernel is None:
            raise RuntimeError(f"{self.prefix}: Chord's MoE kernel runs only after process_weights_after_loading")
        return self.moe_kernel.apply(
            x, layer.w13_weight, layer.w2_weight, topk_weights=topk_weights, topk_ids=topk_ids,
            activation=layer.activation, global_num_experts=layer.global_num_experts,
            expert_map=layer.expert_map, apply_router_weight_on_input=layer.apply_router_weight_on_input,
            shared_experts=shared_experts, shared_experts_input=shared_experts_input)
