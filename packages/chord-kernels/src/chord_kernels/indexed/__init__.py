"""Indexed W4A16 MoE kernels (vLLM routing): the decode kernel and its packed layout.

``chord_kernels.pack("indexed", packed, scales, profile=...)`` builds the weight;
:func:`gemm` runs one GEMM from ``moe_align_block_size`` tensors; :func:`fused_moe` a whole layer.
"""

from chord_kernels.indexed.heuristics import DecodeConfig, choose_block_m, choose_config
from chord_kernels.indexed.layout import PROFILES, IndexedLayout
from chord_kernels.indexed.ops import check_weight, decode_kernel, fused_moe, gemm, prepare

__all__ = [
    "PROFILES",
    "DecodeConfig",
    "IndexedLayout",
    "check_weight",
    "choose_block_m",
    "choose_config",
    "decode_kernel",
    "fused_moe",
    "gemm",
    "prepare",
]
