# ruff: noqa
"""Session 47's variants: four consumer warpgroups of one 64-channel tile (256-channel N tiles, 104
registers) against the planned two of two, on TP8's prefill GEMMs."""
import dataclasses
from chord_kernels.indexed import WgmmaConfig, wgmma as W

r = dataclasses.replace


def fit(c):
    while c.smem_bytes(0) + W.LIST_RESERVE > W.SMEM_LIMIT and c.stages > 2:
        c = r(c, stages=c.stages - 1)
    return c


def more_stages(c, limit=8):
    best = c
    for s in range(c.stages, limit + 1):
        t = r(c, stages=s)
        if t.smem_bytes(0) + W.LIST_RESERVE <= W.SMEM_LIMIT:
            best = t
    return best


def variants(base):
    out = {"base": base}
    c4 = r(base, consumers=4, mt=1, pingpong=False, consumer_regs=104)
    out["c4"] = fit(c4)
    out["c4s"] = more_stages(fit(c4))
    if base.n_run:
        out["c2m1"] = more_stages(r(base, mt=1))
    return {t: c for t, c in out.items()}


BASES = {
    "tp8_dn96": WgmmaConfig(block_m=96, mt=2, bk=256, stages=4, consumers=2, items=1, row_widths=(88,), n_run=7, pingpong=True),
    "tp8_dn64x2": WgmmaConfig(block_m=64, mt=2, bk=256, stages=3, consumers=2, items=2, n_run=7, pingpong=True),
    "tp8_gu96": WgmmaConfig(block_m=96, mt=2, bk=256, stages=2, consumers=2, items=1, dynamic=True, row_widths=(80, 88), shift_pairs=True),
}
