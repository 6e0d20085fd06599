"""Runs the fused Triton kernel in Triton's CPU interpreter, simulating W ranks in one process.

Barriers are compiled out (SYNC=False) and the ranks run one after another; that is a valid
schedule of the two-shot algorithm (a rank reads only the rows it owns and writes only those),
so the result must equal the reference. Prints a JSON list of max errors (in bf16 ulps).
Invoked by test_kernel_interpreter.py in a subprocess (TRITON_INTERPRET must precede import).
"""

from __future__ import annotations

import json
import os
import sys

os.environ["TRITON_INTERPRET"] = "1"

import torch

from chord_tokenweave import kernels as K
from chord_tokenweave.launch import triton_next_pow2
from chord_tokenweave.numerics import add_rmsnorm_reference, reduce_in_rank_order, shard_range


def ulps(got: torch.Tensor, want: torch.Tensor) -> float:
    """Max difference in units of the bf16 spacing at the reference value."""
    if got.numel() == 0:
        return 0.0
    spacing = torch.exp2(torch.floor(torch.log2(want.float().abs().clamp_min(1e-3))) - 7)
    return ((got.float() - want.float()).abs() / spacing).max().item()


def run_case(
    world: int, tokens: int, hidden: int, mode: int, rows: int, ctas: int, stages: int = 1
) -> float:
    g = torch.Generator().manual_seed(world * 1000 + tokens * 10 + hidden + mode)
    plane = tokens * hidden
    bufs = [torch.zeros(2 * plane + 8, dtype=torch.bfloat16) for _ in range(world)]
    xs = [torch.randn(tokens, hidden, generator=g).to(torch.bfloat16) for _ in range(world)]
    for b, x in zip(bufs, xs, strict=True):
        b[:plane].copy_(x.reshape(-1))
    residual = torch.randn(tokens, hidden, generator=g).to(torch.bfloat16)
    weight = (1 + 0.1 * torch.randn(hidden, generator=g)).to(torch.bfloat16)
    ptrs = torch.tensor([b.data_ptr() for b in bufs], dtype=torch.int64)
    y_ref, h_ref = add_rmsnorm_reference(reduce_in_rank_order(xs), residual, weight, 1e-5)
    worst = 0.0
    outs, res_outs = [], []
    for r in range(world):
        lo, hi = shard_range(tokens, world, r)
        if mode == K.MODE_SHARDED:
            res, base, row_lo, row_hi = residual[lo:hi].clone(), lo, lo, hi
        elif mode == K.MODE_REPLICATED:
            res, base, row_lo, row_hi = residual.clone(), 0, lo, hi
        else:
            res, base, row_lo, row_hi = residual.clone(), 0, 0, tokens
        out = torch.empty(tokens, hidden, dtype=torch.bfloat16)
        K.fused_ar_rmsnorm_kernel[(ctas,)](
            ptrs, 0, plane, ptrs, 0, torch.zeros(ctas, dtype=torch.int32),
            torch.zeros(4, dtype=torch.int32), res, base, weight, out, row_lo, row_hi, r,
            hidden, 1e-5, 10**9, W=world, WP=triton_next_pow2(world),
            BLOCK_D=triton_next_pow2(hidden), ROWS=rows, MODE=mode, TRAP=True, STAGES=stages,
            SYNC=False,
        )
        outs.append(out)
        res_outs.append(res)
    for r in range(world):
        lo, hi = shard_range(tokens, world, r)
        if mode == K.MODE_ONESHOT:
            worst = max(worst, ulps(outs[r], y_ref), ulps(res_outs[r], h_ref))
            continue
        worst = max(worst, ulps(bufs[r][:plane].view(tokens, hidden), y_ref))
        if mode == K.MODE_SHARDED:
            worst = max(worst, ulps(res_outs[r], h_ref[lo:hi]))
        else:
            worst = max(worst, ulps(bufs[r][plane : 2 * plane].view(tokens, hidden), h_ref))
    return worst


def check_p2p_copy() -> None:
    """The bandwidth kernel copies every peer's words to the right slot (3 peers, 6 CTAs)."""
    npeers, numel = 3, 10_000
    srcs = [torch.randint(0, 1 << 20, (numel,), dtype=torch.int32) for _ in range(npeers)]
    dst = torch.zeros(npeers * numel, dtype=torch.int32)
    src_ptrs = torch.tensor([t.data_ptr() for t in srcs], dtype=torch.int64)
    dst_ptrs = torch.tensor([dst.data_ptr() + 4 * i * numel for i in range(npeers)],
                            dtype=torch.int64)
    K.p2p_copy_kernel[(6,)](src_ptrs, dst_ptrs, numel, NPEERS=npeers, BLOCK=1024)
    assert torch.equal(dst, torch.cat(srcs)), "p2p copy kernel misplaced data"


def main() -> None:
    check_p2p_copy()
    cases = [
        (2, 5, 24, K.MODE_SHARDED, 2, 3),
        (2, 1, 16, K.MODE_SHARDED, 1, 2),  # tokens < world size
        (3, 7, 40, K.MODE_SHARDED, 1, 2),  # non-power-of-two world and hidden
        (4, 9, 32, K.MODE_REPLICATED, 2, 2),
        (2, 6, 48, K.MODE_ONESHOT, 1, 4),
        (8, 11, 16, K.MODE_SHARDED, 1, 1),
        (2, 9, 32, K.MODE_SHARDED, 2, 2, 3),  # pipelined loop
    ]
    print(json.dumps([[*c, run_case(*c)] for c in cases]))


if __name__ == "__main__":
    sys.exit(main())
