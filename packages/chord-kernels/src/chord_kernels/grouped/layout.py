"""The grouped family's layouts ``"contiguous"`` and ``"masked"``: the indexed tiles, marked.

The grouped GEMMs run on the same engine as the indexed family (the WGMMA kernel on sm_90a, the
decode kernel for small blocks), so their weights are the indexed layout's bytes: 64-channel x
256-K tiles that one 1-D bulk copy lands in shared memory exactly as the consumer warpgroup
dequantizes them (layout.py of the indexed family describes the bits). What differs is the
record: ``family="grouped"`` and ``mode`` = the layout name, so a weight packed for contiguous
prefill is refused by the masked entry point (and by the indexed one) with an error naming both.
"""

from __future__ import annotations

from chord_kernels.indexed.layout import IndexedLayout
from chord_kernels.packed import register_layout

MODES = ("contiguous", "masked")


class GroupedLayout(IndexedLayout):
    """Layout ``"contiguous"`` or ``"masked"``: the indexed tiles with the grouped family's record."""

    family = "grouped"

    def __init__(self, mode: str) -> None:
        self.name = mode
        self.mode = mode


CONTIGUOUS_LAYOUT = register_layout(GroupedLayout("contiguous"))
MASKED_LAYOUT = register_layout(GroupedLayout("masked"))
