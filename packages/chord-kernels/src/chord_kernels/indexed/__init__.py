"""The indexed family: W4A16 MoE GEMMs on vLLM routing tensors, and their packed layout.

``chord_kernels.pack("indexed", packed, scales, profile=...)`` builds the weight; :func:`gemm`
runs one GEMM from ``moe_align_block_size`` tensors (planned by :func:`plan`, launched with a
caller-owned or a default workspace); :func:`gemm_topk_sum` is the down GEMM with the top-k sum; :func:`gemm_masked` runs DeepEP low-latency
``[G, max_m]`` rows from their counts; :func:`fused_moe` runs a whole layer (:func:`moe_experts` its experts on routing
already built). docs/architecture.md
describes how the modules fit together.
"""

from chord_kernels.indexed.api import (
    MaskedRows,
    check_weight,
    fused_moe,
    gemm,
    gemm_masked,
    gemm_topk_sum,
    moe_experts,
    prepare,
    prepare_layer,
    routing_order_rows,
)
from chord_kernels.indexed.decode import DecodeConfig, decode_kernel
from chord_kernels.indexed.heuristics import (
    BLOCK_MS,
    block_ms_for,
    choose_block_m,
    choose_config,
    layer_block_m,
)
from chord_kernels.indexed.layout import PROFILES, IndexedLayout
from chord_kernels.indexed.planner import (
    LaunchPlan,
    configs_for,
    default_configs,
    kernels,
    max_workspace_bytes,
    plan,
    routing_capacity,
)
from chord_kernels.indexed.wgmma import WgmmaConfig, choose_wgmma_config
from chord_kernels.indexed.workspace import new_workspace

__all__ = [
    "BLOCK_MS",
    "PROFILES",
    "DecodeConfig",
    "IndexedLayout",
    "LaunchPlan",
    "MaskedRows",
    "WgmmaConfig",
    "block_ms_for",
    "check_weight",
    "choose_block_m",
    "choose_config",
    "choose_wgmma_config",
    "configs_for",
    "decode_kernel",
    "default_configs",
    "fused_moe",
    "gemm",
    "gemm_masked",
    "gemm_topk_sum",
    "kernels",
    "layer_block_m",
    "max_workspace_bytes",
    "moe_experts",
    "new_workspace",
    "plan",
    "prepare",
    "prepare_layer",
    "routing_capacity",
    "routing_order_rows",
]
