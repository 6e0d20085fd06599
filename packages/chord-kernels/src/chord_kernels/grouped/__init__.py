"""The grouped family: DeepGEMM-style grouped W4A16 GEMMs for expert parallelism.

``chord_kernels.pack("contiguous" | "masked", packed, scales, profile=...)`` builds the weight;
:func:`contiguous` runs rows already grouped by expert (prefill), :func:`masked` runs DeepEP
low-latency ``[G, max_m, K]`` buffers (decode). ``routing.contiguous_layout`` and
``routing.masked_layout`` build those rows from top-k ids for callers without DeepEP.
"""

from chord_kernels.grouped.api import (
    contiguous,
    contiguous_block_m,
    contiguous_config,
    contiguous_tail_config,
    kernels,
    masked,
    masked_block_m,
    masked_routing,
    prepare,
    wide_items_pay,
)
from chord_kernels.grouped.layout import MODES, GroupedLayout
from chord_kernels.indexed.api import contiguous_routing

__all__ = [
    "MODES",
    "GroupedLayout",
    "contiguous",
    "contiguous_block_m",
    "contiguous_config",
    "contiguous_routing",
    "contiguous_tail_config",
    "kernels",
    "masked",
    "masked_block_m",
    "masked_routing",
    "prepare",
    "wide_items_pay",
]
