"""The steps between the GEMMs (SiLU-and-mul, top-k sum) follow the numerics contract exactly."""

from __future__ import annotations

import pytest
import torch

from chord_kernels import ChordInputError, reference
from chord_kernels.ops import local_topk_sum, silu_and_mul, topk_sum
from chord_kernels.ops.topk import chunk_blocks

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("rows", [0, 1, 37])
def test_silu_and_mul_is_fp32_math_rounded_once(device: str, rows: int) -> None:
    g = torch.Generator().manual_seed(rows)
    x = (torch.randn(rows, 2 * 96, generator=g) * 4).bfloat16().to(device)
    gate, up = x.double().chunk(2, dim=-1)
    exact = torch.nn.functional.silu(gate) * up
    out = torch.full((rows, 96), float("nan"), dtype=torch.bfloat16, device=device)
    assert silu_and_mul(x, out=out) is out
    assert torch.equal(out, reference.silu_and_mul(x))
    # One rounding of an fp32 result: within half a bf16 ulp of the exact value (plus fp32 error).
    ulp = torch.finfo(torch.bfloat16).eps * exact.abs().clamp_min(1e-30)
    assert bool(((out.double() - exact).abs() <= 0.5 * ulp + 1e-6 * exact.abs() + 1e-30).all())
    assert silu_and_mul(x).shape == (rows, 96)


@pytest.mark.gpu
def test_silu_and_mul_kernel_equals_pytorch_for_every_bf16_gate() -> None:
    """The CUDA kernel against PyTorch's fp32 math for all 65,536 bf16 gate values (NaN, inf, -0,
    subnormals) times varied up values, on the 16-byte path (I % 8 = 0) and the scalar one."""
    gate = torch.arange(1 << 16, dtype=torch.int32).to(torch.int16).view(torch.bfloat16).reshape(-1, 256)
    g = torch.Generator().manual_seed(3)
    up = (torch.randn(gate.shape, generator=g) * 3).bfloat16()
    up[0, :8] = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e-40, 3e38, -1.0])
    for inter in (256, 4):  # vectorised, scalar (I % 8 != 0)
        x = torch.cat([gate.reshape(-1, inter), up.reshape(-1, inter)], dim=1).cuda()
        out = torch.full((x.shape[0], inter), float("nan"), dtype=torch.bfloat16, device="cuda")
        silu_and_mul(x, out=out)
        want = reference.silu_and_mul(x)
        same = (out.view(torch.int16) == want.view(torch.int16)) | (out.isnan() & want.isnan())
        assert bool(same.all()), f"I={inter}: {int((~same).sum())} values differ from PyTorch's"


@pytest.mark.gpu
def test_silu_and_mul_kernel_layouts_and_graph_replay() -> None:
    g = torch.Generator().manual_seed(4)
    base = (torch.randn(4 * 7 * 64 + 1, generator=g) * 4).bfloat16().cuda()
    cases = {
        "misaligned view": base[1:].reshape(4 * 7, 64),      # 2-byte offset: the scalar path
        "3-D": base[:-1].reshape(4, 7, 64),
        "1-D": base[:64],
        "non-contiguous": base[:-1].reshape(64, 4 * 7).t(),  # copied to contiguous first
        "odd rows, I = 40": base[: 13 * 80].reshape(13, 80),
    }
    for name, x in cases.items():
        assert torch.equal(silu_and_mul(x), reference.silu_and_mul(x.contiguous())), name
    x = base[:-1].reshape(28, 64).clone()
    out = torch.empty(28, 32, dtype=torch.bfloat16, device="cuda")
    silu_and_mul(x, out=out)  # compiled and loaded before capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        silu_and_mul(x, out=out)
    x.copy_((torch.randn(28, 64, generator=g) * 4).bfloat16())
    out.fill_(float("nan"))
    graph.replay()
    assert torch.equal(out, reference.silu_and_mul(x))
    with pytest.raises(ChordInputError, match="contiguous"):
        silu_and_mul(x, out=torch.empty(32, 28, dtype=torch.bfloat16, device="cuda").t())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("rows", "top_k"), [(0, 8), (1, 1), (1, 8), (29, 3)])
def test_topk_sum_is_fp32_sum_rounded_once(device: str, rows: int, top_k: int) -> None:
    g = torch.Generator().manual_seed(rows * 10 + top_k)
    x = torch.randn(rows, top_k, 64, generator=g).bfloat16().to(device)
    out = torch.full((rows, 64), float("nan"), dtype=torch.bfloat16, device=device)
    assert topk_sum(x, out=out) is out
    assert torch.equal(out, x.float().sum(dim=1).bfloat16())
    exact = x.double().sum(dim=1)
    ulp = torch.finfo(torch.bfloat16).eps * exact.abs()
    assert bool(((out.double() - exact).abs() <= 0.5 * ulp + 1e-5 * x.double().abs().sum(dim=1) + 1e-30).all())
    assert topk_sum(x).shape == (rows, 64)


@pytest.mark.gpu
@pytest.mark.parametrize(("tokens", "top_k", "n", "mapped"),
                         [(0, 8, 64, False), (1, 1, 8, False), (1, 8, 7168, True), (37, 12, 2400, True),
                          (160, 8, 7168, False), (5, 32, 1032, True), (300, 8, 7168, True), (1500, 8, 2400, True),
                          (1400, 12, 4200, True)])
def test_local_topk_sum_adds_local_rows_in_choice_order(tokens: int, top_k: int, n: int, mapped: bool) -> None:
    """The CUDA kernel against the fp32 sum of the local rows in ascending choice order, bit for
    bit. On 132 SMs: one token over seven CTAs (one chunk per thread), 160 tokens over four (CTAs
    looping over 1024-channel blocks), 300 and 1400 tokens over two, 1500 tokens one CTA each;
    under a map tokens have 0 to 8 local choices, which takes the kernel's paths for up to two
    (four chunks a pass), up to four (two a pass; 1400 tokens need a second pass) and more.
    N = 2400 leaves a partial last block, top_k > 8 a second round of loads; non-local rows are
    NaN (never read), the output poisoned, and some tokens have no local choice (their sum is
    zero)."""
    g = torch.Generator().manual_seed(tokens * 100 + top_k)
    num_global, num_local = (64, 16) if mapped else (16, 16)
    ids = torch.stack([torch.randperm(num_global, generator=g)[:top_k] for _ in range(tokens)]) if tokens else \
        torch.zeros(0, top_k, dtype=torch.int64)
    expert_map = None
    if mapped:
        expert_map = torch.full((num_global,), -1, dtype=torch.int32)
        expert_map[num_global - num_local:] = torch.arange(num_local, dtype=torch.int32)  # the last 16 are local
        if tokens:
            ids[0] = torch.arange(top_k)  # no local choice
    local = (ids >= num_global - num_local) if mapped else torch.ones_like(ids, dtype=torch.bool)
    rows = torch.randn(tokens, top_k, n, generator=g).bfloat16()
    rows[~local] = float("nan")
    want = torch.zeros(tokens, n)
    for j in range(top_k):
        want = torch.where(local[:, j, None], want + rows[:, j].float(), want)
    out = torch.full((tokens, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    got = local_topk_sum(rows.reshape(-1, n).cuda(), ids.to(torch.int32).cuda(), num_local_experts=num_local,
                         expert_map=None if expert_map is None else expert_map.cuda(), out=out)
    assert got is out
    assert torch.equal(out.cpu(), want.bfloat16())


@pytest.mark.parametrize(("tokens", "chunks", "want"), [(1, 896, 7), (64, 896, 7), (160, 896, 4), (240, 896, 3),
                                                     (384, 896, 2), (8192, 896, 2), (1500, 300, 1), (5, 1, 1)])
def test_chunk_blocks_fill_the_sms_without_idle_threads(tokens: int, chunks: int, want: int) -> None:
    """132 SMs: few tokens spread their chunks over CTAs until ``CTAS_PER_SM`` x 132 CTAs (at most
    one chunk per thread); from 528 tokens on, as few CTAs as give each thread at most
    ``FEW_CHOICES_CHUNKS`` chunks (Kimi's 7168 channels: two)."""
    assert chunk_blocks(tokens, chunks, 132) == want


def test_errors_name_what_was_expected() -> None:
    with pytest.raises(ChordInputError, match="even last dimension"):
        silu_and_mul(torch.zeros(2, 5, dtype=torch.bfloat16))
    with pytest.raises(ChordInputError, match="dtype torch.bfloat16"):
        silu_and_mul(torch.zeros(2, 4))
    with pytest.raises(ChordInputError, match=r"out: expected shape \[2, 2\]"):
        silu_and_mul(torch.zeros(2, 4, dtype=torch.bfloat16), out=torch.zeros(2, 4, dtype=torch.bfloat16))
    with pytest.raises(ChordInputError, match="3 dimensions"):
        topk_sum(torch.zeros(2, 4, dtype=torch.bfloat16))
    with pytest.raises(ChordInputError, match=r"out: expected shape \[2, 4\]"):
        topk_sum(torch.zeros(2, 3, 4, dtype=torch.bfloat16), out=torch.zeros(2, 3, dtype=torch.bfloat16))
