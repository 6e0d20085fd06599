# ruff: noqa
"""Session 43's experimental configuration classes (shared by ab.py and layer_ab.py)."""
import dataclasses

from chord_kernels.indexed import wgmma as W


@dataclasses.dataclass(frozen=True)
class GroupCommit(W.WgmmaConfig):
    """Per-K-group commits whatever the tiles (needs group_commit_macro.patch: CHORD_EXP_GROUP_COMMIT in wgmma.cuh)."""

    @property
    def commit_per_step(self):
        return False

    def source(self):
        return "#define CHORD_EXP_GROUP_COMMIT\n" + super().source()
