"""The one place chord-bench reaches past chord-kernels' public API.

The harness times ``chord_kernels.indexed.gemm(..., config=...)`` with the configuration the
library itself would launch, so the table can say which one ran and ``ci/`` sweeps can vary it.
Which configuration that is belongs to chord-kernels' launch planning, which has no public name
yet; :func:`launch_config` is the only function here that asks for it. When chord-kernels gains a
public launch plan, only this function changes.
"""

from __future__ import annotations

import torch

from chord_kernels import PackedWeight
from chord_kernels.routing import AlignedRouting


def launch_config(weight: PackedWeight, routing: AlignedRouting, device: torch.device):
    """The ``DecodeConfig`` ``chord_kernels.indexed.gemm`` launches for ``routing`` on ``device``.

    ``gemm`` plans from the routing tensors' capacity (blocks it may visit, known without a device
    read) and the SM count; so does this.
    """
    from chord_kernels.indexed.ops import planned_config

    num_blocks = min(routing.expert_ids.numel(), routing.sorted_token_ids.numel() // routing.block_m)
    num_sms = torch.cuda.get_device_properties(device).multi_processor_count
    return planned_config(weight, routing.block_m, num_blocks, num_sms)
