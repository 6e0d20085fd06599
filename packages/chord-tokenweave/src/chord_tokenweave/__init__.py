"""chord_tokenweave: TokenWeave-style overlap for tensor parallelism, without NVLink multicast.

Importing this package does not touch CUDA, but it does force the no-multicast environment
(:data:`NO_MULTICAST_ENV`, with a warning where a variable said otherwise), so that every NCCL
communicator and symmetric allocation made after the import — including the library all-reduce of
:func:`allreduce_add_rmsnorm` and the reference model's — runs without NVLink multicast. The Triton
kernels load only where Triton is installed (the ``gpu`` extra); everything else runs on CPU with
gloo.
"""

from __future__ import annotations

from chord_tokenweave.env import NO_MULTICAST_ENV, disable_multicast
from chord_tokenweave.errors import (
    BarrierTimeoutError,
    MulticastForbiddenError,
    TableError,
    TokenWeaveError,
    TokenWeaveInputError,
)
from chord_tokenweave.fused import allreduce_add_rmsnorm, fused_allreduce_rmsnorm
from chord_tokenweave.numerics import add_rmsnorm_reference, shard_range
from chord_tokenweave.split import GemmShape, wave_aware_split
from chord_tokenweave.table import Decision, SplitTable, TableEntry
from chord_tokenweave.workspace import SymmetricWorkspace

# Importing the submodules above creates no communicator or symmetric memory; this runs before
# anything of this package can.
disable_multicast()

__version__ = "0.1.0"

__all__ = [
    "NO_MULTICAST_ENV",
    "BarrierTimeoutError",
    "Decision",
    "GemmShape",
    "MulticastForbiddenError",
    "SplitTable",
    "SymmetricWorkspace",
    "TableEntry",
    "TableError",
    "TokenWeaveError",
    "TokenWeaveInputError",
    "__version__",
    "add_rmsnorm_reference",
    "allreduce_add_rmsnorm",
    "disable_multicast",
    "fused_allreduce_rmsnorm",
    "shard_range",
    "wave_aware_split",
]
