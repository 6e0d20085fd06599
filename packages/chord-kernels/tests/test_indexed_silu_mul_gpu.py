"""``gemm(..., activation="silu")`` on an H200: SiLU-and-mul fused into the WGMMA kernel's epilogue
(each warpgroup's two tiles are the gate and up channels of the same outputs) and the decode
kernel's (pairs of gate and up warps) against the two-step path (plain GEMM, then
``ops.silu_and_mul``: bit-identical) and against the reference; the shapes that keep the two steps;
poisoned outputs, ragged routing, expert_map, graph replay."""

from __future__ import annotations

import dataclasses
import zlib

import pytest
import torch
from test_indexed_gpu import Case, _rel_err, _routing, _weights

import chord_kernels
from chord_kernels import reference
from chord_kernels.errors import ChordInputError
from chord_kernels.indexed import choose_config, gemm, plan, routing_capacity
from chord_kernels.indexed.decode import DecodeConfig
from chord_kernels.indexed.planner import silu_mul_twin
from chord_kernels.indexed.wgmma import WgmmaConfig, choose_wgmma_config
from chord_kernels.jit import CudaKernel, i32
from chord_kernels.ops import silu_and_mul
from chord_kernels.routing import align_block_size

pytestmark = pytest.mark.gpu
REL_TOL = 5e-3

_SILU_CHECK = CudaKernel(name="silu_check", entry="silu_check", source=r"""
#include <cuda_bf16.h>
#include "chord/common/activation.cuh"
extern "C" __global__ void silu_check(const unsigned short* bits, float* ieee, float* chord_silu, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const float x = __bfloat162float(__ushort_as_bfloat16(bits[i]));
    ieee[i] = x / (1.0f + expf(-x));
    chord_silu[i] = chord::silu_of_bf16(x);
  }
}
""")


def test_epilogue_silu_matches_ieee_and_torch_for_every_bf16() -> None:
    """The epilogue's branch-free SiLU equals x / (1 + expf(-x)) with IEEE division, and PyTorch's
    fp32 silu, for all 65,536 bf16 inputs (what makes the fused path bit-identical)."""
    bits = torch.arange(1 << 16, dtype=torch.int32, device="cuda").to(torch.int16)
    x = bits.view(torch.bfloat16).float()
    ieee, ours = torch.empty_like(x), torch.empty_like(x)
    _SILU_CHECK.launch((256,), (256,), (bits, ieee, ours, i32(x.numel())))
    torch.cuda.synchronize()
    theirs = torch.nn.functional.silu(x)

    def same(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        return (p.view(torch.int32) == q.view(torch.int32)) | (p.isnan() & q.isnan())

    bad = (~same(ours, ieee)).nonzero().flatten()
    assert bad.numel() == 0, f"{bad.numel()} bf16 inputs differ, e.g. {x[bad[:5]].tolist()}"
    assert same(ieee, theirs).all(), "torch's silu is not x / (1 + expf(-x)) here"


@dataclasses.dataclass(frozen=True)
class SCase:
    case: Case
    fused: bool  # whether the planned kernel fuses the activation
    config: WgmmaConfig | DecodeConfig | None = None  # None: the planner's


SCASES = [
    # Kimi gate_up: EP8 wide items (24-token blocks x 7, weight ring), 64-token blocks x 2, TP8 top-8.
    SCase(Case("ep8_gate_up_wide_tok128", 48, 4096, 7168, 6144, 1, block_m=24), True),
    SCase(Case("ep8_gate_up_bm64_items2", 48, 4096, 7168, 9000, 1, block_m=64), True),
    SCase(Case("tp8_gate_up_bm48", 384, 512, 7168, 2048, 8, block_m=48), True),
    # Row widths: 64 x 2 items at 96 and 112 tokens (85 rows per expert), 72-token blocks at 56 and 64.
    SCase(Case("ep8_gate_up_bm64_rows_tok85", 48, 4096, 7168, 48 * 85, 1, block_m=64), True),
    SCase(Case("tp8_gate_up_bm72_rows", 384, 512, 7168, 2400, 8, block_m=72), True),
    # I = 192 (three 64-channel output blocks: the last N tile's second warpgroup has none), expert_map.
    SCase(Case("odd_blocks_expert_map_bm32", 16, 384, 2080, 200, 4, block_m=32, routing="mapped"), True),
    SCase(Case("hot_expert_wide", 4, 256, 512, 500, 1, block_m=24, routing="hot"), True),
    # The seven-block items at two pipelined widths (6 and 7 blocks, 224 consumer registers): most
    # Kimi EP8 experts at 150 rows in one item, the rest of the others in a second one at width 6.
    SCase(Case("ep8_gate_up_wide_tok150", 48, 4096, 7168, 48 * 150, 1, block_m=24), True),
    SCase(Case("empty_experts_short_k_tile", 8, 256, 1056, 90, 2, block_m=56, routing="sparse"), True),
    SCase(Case("one_consumer_m1", 6, 256, 256, 1, 2, block_m=40), True,
          WgmmaConfig(40, 2, 256, 3, consumers=1, silu_mul=True)),
    # Four consumer warpgroups (gate_up's 24-48-token one-block items): EP8 at 16 rows per expert;
    # I = 192 under an expert map (the last N tile's gate and up blocks in three warpgroups, none in
    # the fourth) with a one-group last K tile.
    SCase(Case("four_ep8_gate_up_bm32", 48, 4096, 7168, 768, 1, block_m=32), True),
    SCase(Case("four_odd_blocks_expert_map", 16, 384, 4128, 200, 4, block_m=32, routing="mapped"), True,
          WgmmaConfig(32, 2, 256, 2, consumers=4, consumer_regs=104, silu_mul=True)),
    # Items of up to two 24-token blocks (planned at 9-16 rows per expert): EP8 at 16 rows; I = 192
    # under an expert map.
    SCase(Case("four_pairs_ep8_gate_up_bm24", 48, 4096, 7168, 768, 1, block_m=24), True,
          dataclasses.replace(choose_wgmma_config(4096, 7168, 24, 16.0), silu_mul=True)),
    SCase(Case("four_pairs_odd_blocks_expert_map", 16, 384, 4128, 200, 4, block_m=24, routing="mapped"), True,
          WgmmaConfig(24, 2, 256, 2, consumers=4, items=2, consumer_regs=104, silu_mul=True)),
    # 16-token blocks from K = 2048 run on the WGMMA kernel (fused).
    SCase(Case("wgmma_bm16", 48, 4096, 7168, 160, 1, block_m=16), True),
    # The decode kernel's pairs of gate and up warps: its 16-token wide tiles with row widths (strided)
    # below K = 2048; row widths under an expert map with a short last K stage (I = 256: two N tiles);
    # the strided twin of the 8-token wide tiles; 512-channel tiles of eight warps, dynamic schedule.
    SCase(Case("decode_bm16_k1024", 48, 4096, 1024, 160, 1, block_m=16), True),
    SCase(Case("decode_bm16_rows_expert_map", 16, 512, 2080, 200, 4, block_m=16, routing="mapped"), True,
          DecodeConfig(block_m=16, mt=4, stages=2, ctas_per_sm=2, row_widths=True, silu_mul=True)),
    SCase(Case("decode_bm8_strided", 48, 4096, 7168, 160, 1), True,
          dataclasses.replace(choose_config(4096, 7168, 8), schedule="strided", silu_mul=True)),
    SCase(Case("decode_bm32_dynamic", 6, 1024, 1056, 40, 3, block_m=32), True,
          DecodeConfig(block_m=32, warps=8, mt=4, stages=2, ctas_per_sm=1, schedule="dynamic", silu_mul=True)),
    # Two steps: I not a multiple of 64, and the decode kernel's other tiles (the planner fuses only
    # the wide 16-token ones; the balanced schedule splits items along K).
    SCase(Case("i_not_multiple_of_64", 6, 264, 2048, 40, 2, block_m=32), False),
    SCase(Case("decode_bm8", 48, 4096, 7168, 160, 1, block_m=8), False),
]


@pytest.mark.parametrize("scase", SCASES, ids=[s.case.name for s in SCASES])
def test_silu_mul_matches_two_steps_and_reference(scase: SCase) -> None:
    case = scase.case
    gen = torch.Generator(device="cuda").manual_seed(zlib.crc32(case.name.encode()))
    packed, scales = _weights(case.experts, case.n, case.k, gen)
    pw = chord_kernels.pack("indexed", packed, scales, profile="h200_tp8" if case.name.startswith("tp8") else "h200_ep8")
    ids, global_e, expert_map = _routing(case, gen)
    r = align_block_size(ids, case.block_m, global_e, expert_map)
    args = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    launch = plan(pw, block_m=case.block_m, capacity=routing_capacity(r.sorted_token_ids, r.expert_ids, case.block_m),
                  config=scase.config)
    assert (silu_mul_twin(launch.config, case.n) is not None) == scase.fused
    a = torch.randn(case.rows, case.k, generator=gen, device="cuda").to(torch.bfloat16)
    slots = case.rows * case.top_k
    outs = []
    for _ in range(2):
        out = torch.full((slots, case.n // 2), float("nan"), dtype=torch.bfloat16, device="cuda")
        gemm(a, pw, *args, block_m=case.block_m, top_k=case.top_k, out=out, config=scase.config, activation="silu")
        outs.append(out)
    plain_config = dataclasses.replace(scase.config, silu_mul=False) if scase.config else None
    plain = gemm(a, pw, *args, block_m=case.block_m, top_k=case.top_k, config=plain_config)
    two_steps = silu_and_mul(plain)
    torch.cuda.synchronize()
    ref = reference.silu_and_mul(reference.indexed_gemm(a, (packed, scales), *args, block_m=case.block_m,
                                                        top_k=case.top_k))
    nan_rows = outs[0].isnan().any(dim=1).nonzero().flatten().tolist()
    assert not nan_rows, f"{len(nan_rows)} output rows never written, e.g. {nan_rows[:8]}"
    assert torch.equal(outs[0], outs[1]), "repeated runs differ"
    differ = (outs[0] != two_steps).sum().item()
    assert differ == 0, f"{differ} of {two_steps.numel()} outputs differ from gemm + silu_and_mul"
    err = _rel_err(outs[0], ref)
    assert err <= REL_TOL, f"relative error {err:.3e}"
    if case.routing == "mapped":
        zero_rows = (ref == 0).all(dim=1)
        assert zero_rows.any() and (outs[0][zero_rows] == 0).all(), "rows of non-local experts must be zero"


def test_silu_mul_graph_replay_and_errors() -> None:
    gen = torch.Generator(device="cuda").manual_seed(23)
    e, n, k, rows, top_k, block_m = 16, 512, 1024, 300, 2, 48
    packed, scales = _weights(e, n, k, gen)
    pw = chord_kernels.pack("indexed", packed, scales, profile="h200_ep8")
    ids = torch.rand(rows, e, generator=gen, device="cuda").argsort(dim=1)[:, :top_k]
    r = align_block_size(ids, block_m, e)
    args = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    a = torch.randn(rows, k, generator=gen, device="cuda").to(torch.bfloat16)
    out = torch.empty(rows * top_k, n // 2, dtype=torch.bfloat16, device="cuda")
    chord_kernels.indexed.prepare(pw, block_m, activation="silu")
    run = lambda: gemm(a, pw, *args, block_m=block_m, top_k=top_k, out=out, activation="silu")  # noqa: E731
    run()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()
    a.copy_(torch.randn(rows, k, generator=gen, device="cuda").to(torch.bfloat16))
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    ref = reference.silu_and_mul(reference.indexed_gemm(a, (packed, scales), *args, block_m=block_m, top_k=top_k))
    assert not out.isnan().any() and _rel_err(out, ref) <= REL_TOL
    with pytest.raises(ChordInputError, match="topk_weights"):
        gemm(a, pw, *args, block_m=block_m, top_k=top_k, activation="silu",
             topk_weights=torch.ones(rows * top_k, device="cuda"))
    with pytest.raises(ChordInputError, match="activation"):
        gemm(a, pw, *args, block_m=block_m, top_k=top_k, activation="gelu")
    with pytest.raises(ChordInputError, match="fuses SiLU-and-mul"):
        gemm(a, pw, *args, block_m=block_m, top_k=top_k, config=WgmmaConfig(block_m, 2, 256, 3, silu_mul=True))
    with pytest.raises(ChordInputError, match=r"\[slots|expected"):
        gemm(a, pw, *args, block_m=block_m, top_k=top_k, activation="silu",
             out=torch.empty(rows * top_k, n, dtype=torch.bfloat16, device="cuda"))
