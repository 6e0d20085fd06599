"""The WGMMA kernel's split tail (``WgmmaConfig.tail_parts``) on an H200: routing drawn so that the
whole items leave a sparse last round on this GPU's SMs, the tail's items cut along K and summed
from the workspace. Against the reference on fresh random data with poisoned outputs; the parts'
workspace slots checked to have been written (the tail really was cut); repeated runs bit-identical;
the fused SiLU-and-mul and the epilogue top-k sum against their two-step paths with the same cut;
every item cut (fewer items than half the SMs, M = 1); an expert map; a short last K stage; the grouped
contiguous mode's items, which read their routing from ``m_indices``. (CUDA graph replays:
test_indexed_wgmma_gpu.py.)"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from test_indexed_gpu import _rel_err, _weights

import chord_kernels
from chord_kernels import grouped, hardware, reference, routing
from chord_kernels.errors import ChordInputError
from chord_kernels.indexed import gemm, gemm_topk_sum, new_workspace, plan
from chord_kernels.indexed.planner import routing_capacity
from chord_kernels.indexed.wgmma import WgmmaConfig, choose_wgmma_config
from chord_kernels.indexed.workspace import COUNTER_BYTES
from chord_kernels.ops import silu_and_mul
from chord_kernels.routing import align_block_size

pytestmark = pytest.mark.gpu
REL_TOL = 5e-3


def _counts(items: int, experts: int, config: WgmmaConfig, top_k: int, gen: torch.Generator,
            short_items: bool = False) -> list[int]:
    """Rows per expert making exactly ``items`` items of ``config`` (one N tile), a multiple of
    ``top_k`` in all: items spread over the experts (a few left empty), each expert's last block
    part-filled (by less than half a block, so that taking the remainder off the largest keeps its
    items); with ``short_items`` every other expert's last item a block short."""
    used = max(1, experts - 2)
    per = [items // used + (e < items % used) for e in range(used)] + [0] * (experts - used)
    rows_per_item = config.items * config.block_m
    counts = []
    for q in per:
        short = int(torch.randint(0, config.block_m // 2, (1,), generator=gen, device="cuda")) if q else 0
        short += config.block_m if short_items and q and len(counts) % 2 else 0
        counts.append(q * rows_per_item - short)
    counts[0] -= sum(counts) % top_k
    order = torch.randperm(experts, generator=gen, device="cuda").tolist()
    return [counts[i] for i in order]


def _items(counts: list[int], config: WgmmaConfig) -> int:
    return sum(math.ceil(math.ceil(c / config.block_m) / config.items) for c in counts)


@dataclasses.dataclass(frozen=True)
class TailCase:
    name: str
    config: WgmmaConfig
    k: int
    tail: int  # items in the last round (0 < tail <= SMs / 2), or -n for n items in all
    experts: int = 48
    mapped: bool = False
    weighted: bool = False
    short_items: bool = False  # every other expert's last item a block short (tail_blocks: an empty part)


def _kimi(n: int, k: int, block_m: int, tok_e: float, parts: int = 8) -> WgmmaConfig:
    return dataclasses.replace(choose_wgmma_config(n, k, block_m, tok_e), tail_parts=parts)


CASES = [
    # ep8_tok16's gate_up (four warpgroups, 24 x 2 items, dynamic), 4 items past three rounds: 8 parts.
    TailCase("pairs_c4_k7168", _kimi(4096, 7168, 24, 16.0), 7168, tail=4),
    # The 64 x 2 prefill items (row widths 96, 112), the down GEMM (K = 2048: 8 stages), weighted.
    TailCase("items64x2_down_weighted", _kimi(7168, 2048, 64, 128.0), 2048, tail=9, weighted=True),
    # 56-token one-block items (per-K-group commits, whole stages) under an expert map.
    TailCase("bm56_mapped", _kimi(4096, 2048, 56, 43.0, parts=4), 2048, tail=30, mapped=True),
    # Three warpgroups (the EP8 down's 24-token items); a short last K stage (K / 32 = 33: 5 stages).
    TailCase("three_short_k_weighted", dataclasses.replace(WgmmaConfig(24, 2, 256, 3, consumers=3, consumer_regs=128),
                                                           tail_parts=16), 1056, tail=2, weighted=True),
    # Every item cut: 5 items (5 x 26 parts on 132 SMs, at most the 28 stages), and M = 1 (one item).
    TailCase("every_item_cut", _kimi(4096, 7168, 24, 16.0, parts=32), 7168, tail=-5),
    TailCase("m1", dataclasses.replace(WgmmaConfig(32, 2, 256, 3), tail_parts=8), 2048, tail=-1, experts=6),
]


def _blocks(config: WgmmaConfig, parts: int = 2) -> WgmmaConfig:
    return dataclasses.replace(config, tail_parts=parts, tail_blocks=True)


BLOCK_CASES = [
    # The 64 x 2 prefill items (row widths 96, 112), the down GEMM, weighted; some tail items of one block.
    TailCase("blocks_items64x2_down", _blocks(_kimi(7168, 2048, 64, 128.0)), 2048, tail=9, weighted=True,
             short_items=True),
    # ep8_tok16's gate_up items (four warpgroups, 24 x 2, dynamic) under an expert map.
    TailCase("blocks_pairs_c4_mapped", _blocks(_kimi(4096, 7168, 24, 16.0)), 7168, tail=4, mapped=True),
    # Items of up to four 32-token blocks, cut into up to four runs; every item cut (7 items).
    TailCase("blocks_four_every_item_cut", _blocks(WgmmaConfig(32, 2, 128, 3, items=4), parts=4), 1024, tail=-7,
             experts=8, short_items=True),
]


@dataclasses.dataclass
class Draw:
    weight: chord_kernels.PackedWeight
    quantized: tuple[torch.Tensor, torch.Tensor]  # (codes, scales) for the reference
    route: tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # vLLM's routing tensors
    a: torch.Tensor  # a row per slot
    topk_weights: torch.Tensor | None
    topk_ids: torch.Tensor
    grid: int  # the launch's CTAs (fewer than the SMs where the routing holds few blocks)
    items: int
    full: int  # whole items
    parts: int  # parts per tail item


def _setup(case: TailCase, gen: torch.Generator, top_k: int = 1) -> Draw:
    config, sms = case.config, hardware.num_sms(torch.cuda.current_device())
    n = config.block_n  # one N tile: items per expert = the items of the count
    total = case.tail + sms * 2 if case.tail > 0 else -case.tail
    counts = (_counts(total, case.experts, config, top_k, gen, case.short_items) if total > 1
              else [0] * (case.experts - 1) + [top_k])
    assert _items(counts, config) == total
    rows = sum(counts)
    local = torch.repeat_interleave(torch.arange(case.experts, device="cuda"), torch.tensor(counts, device="cuda"))
    local = local[torch.randperm(rows, generator=gen, device="cuda")]
    global_e, expert_map = case.experts, None
    ids = local
    if case.mapped:  # local experts among 4x as many global ones, plus rows of non-local experts
        global_e = 4 * case.experts
        expert_map = torch.full((global_e,), -1, dtype=torch.int32, device="cuda")
        glob = torch.randperm(global_e, generator=gen, device="cuda")[: case.experts]
        expert_map[glob] = torch.arange(case.experts, dtype=torch.int32, device="cuda")
        nonlocal_ids = (expert_map < 0).nonzero().flatten()
        extra = nonlocal_ids[torch.randint(0, nonlocal_ids.numel(), (rows // 4,), generator=gen, device="cuda")]
        ids = torch.cat([glob[local], extra])
        ids = ids[torch.randperm(ids.numel(), generator=gen, device="cuda")]
    ids = ids.view(-1, top_k)
    packed, scales = _weights(case.experts, n, case.k, gen)
    pw = chord_kernels.pack("indexed", packed, scales, profile="h200_ep8")
    r = align_block_size(ids, config.block_m, global_e, expert_map)
    # The launch's capacity (routing_capacity: the sorted ids can hold fewer blocks than expert_ids lists).
    capacity = routing_capacity(r.sorted_token_ids, r.expert_ids, config.block_m)
    grid = plan(pw, block_m=config.block_m, capacity=capacity, config=config).grid
    full, parts = config.tail_cut(total, grid, case.k)
    assert parts > 1 and total - full == (case.tail if case.tail > 0 else total), "the draw leaves a sparse tail"
    a = torch.randn(ids.numel(), case.k, generator=gen, device="cuda").to(torch.bfloat16)  # a row per slot
    tw = torch.rand(ids.shape, generator=gen, device="cuda") if case.weighted else None
    return Draw(pw, (packed, scales), (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded), a, tw, ids,
                grid, total, full, parts)


def _workspace(d: Draw, config: WgmmaConfig) -> torch.Tensor:
    return new_workspace(plan(d.weight, block_m=config.block_m, capacity=d.route[1].numel(), config=config).workspace_bytes)


def _poisoned_workspace(d: Draw, config: WgmmaConfig) -> torch.Tensor:
    ws = _workspace(d, config)
    ws[COUNTER_BYTES:].fill_(0xFF)  # NaN partials: a slot left unwritten stays NaN
    return ws


def _slots_written(ws: torch.Tensor, config: WgmmaConfig, slots: int) -> list[bool]:
    """Whether each workspace slot holds a finite value (a part stored its accumulators there)."""
    partials = ws[COUNTER_BYTES:].view(torch.float32)
    per_slot = config.block_n * config.tile
    return [bool(partials[s * per_slot:(s + 1) * per_slot].isfinite().any()) for s in range(slots)]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_split_tail_matches_reference(case: TailCase) -> None:
    gen = torch.Generator(device="cuda").manual_seed(sum(map(ord, case.name)))
    d = _setup(case, gen)
    config = case.config
    ws = _poisoned_workspace(d, config)
    run = dict(block_m=config.block_m, top_k=1, topk_weights=d.topk_weights)
    outs = []
    for _ in range(2):
        out = torch.full((d.a.shape[0], d.weight.n), float("nan"), dtype=torch.bfloat16, device="cuda")
        gemm(d.a, d.weight, *d.route, out=out, config=config, workspace=ws, **run)
        outs.append(out)
    torch.cuda.synchronize()
    written = _slots_written(ws, config, d.grid)
    cut = (d.items - d.full) * d.parts
    assert all(written[:cut]) and not any(written[cut:]), "the tail's parts, and only they, use workspace slots"
    assert not bool(ws[:COUNTER_BYTES].view(torch.int32).any()), "every counter back at zero"
    ref = reference.indexed_gemm(d.a, d.quantized, *d.route, **run)
    nan_rows = outs[0].isnan().any(dim=1).nonzero().flatten().tolist()
    assert not nan_rows, f"{len(nan_rows)} output rows never written, e.g. {nan_rows[:8]}"
    assert _rel_err(outs[0], ref) <= REL_TOL
    assert torch.equal(outs[0], outs[1]), "repeated runs differ"
    # Against the same configuration without the cut: the same error bound (the parts sum in another order).
    whole = torch.full_like(outs[0], float("nan"))
    gemm(d.a, d.weight, *d.route, out=whole, config=dataclasses.replace(config, tail_parts=0), **run)
    assert _rel_err(outs[0], whole) <= REL_TOL


@pytest.mark.parametrize("case", [CASES[0], CASES[2], CASES[4]], ids=[CASES[i].name for i in (0, 2, 4)])
def test_split_tail_fused_silu_matches_two_steps(case: TailCase) -> None:
    """SiLU-and-mul in the last part's epilogue (from the summed slots) gives the bits of the plain
    output, cut the same way, through ``ops.silu_and_mul``."""
    gen = torch.Generator(device="cuda").manual_seed(5)
    d = _setup(case, gen)
    config = case.config
    assert config.fits_silu_mul(d.weight.n)
    plain = torch.full((d.a.shape[0], d.weight.n), float("nan"), dtype=torch.bfloat16, device="cuda")
    gemm(d.a, d.weight, *d.route, block_m=config.block_m, top_k=1, out=plain, config=config)
    fused = torch.full((d.a.shape[0], d.weight.n // 2), float("nan"), dtype=torch.bfloat16, device="cuda")
    gemm(d.a, d.weight, *d.route, block_m=config.block_m, top_k=1, out=fused, activation="silu",
         config=dataclasses.replace(config, silu_mul=True))
    torch.cuda.synchronize()
    assert not fused.isnan().any()
    assert torch.equal(fused, silu_and_mul(plain)), "the fused SiLU-and-mul differs from the two steps"
    ref = reference.indexed_gemm(d.a, d.quantized, *d.route, block_m=config.block_m, top_k=1)
    assert _rel_err(fused, silu_and_mul(ref)) <= REL_TOL


def test_split_tail_epilogue_topk_sum_matches_two_steps() -> None:
    """The top-k sum in the epilogue of a cut down GEMM (top-k 4, weighted) against the two steps
    with the same cut, bit for bit, and against the reference."""
    gen = torch.Generator(device="cuda").manual_seed(9)
    base = choose_wgmma_config(512, 2048, 24, 12.0)
    config = dataclasses.replace(base, tail_parts=8)
    twin = config.topk_sum_twin(config.block_n)  # (the weight: one N tile)
    assert twin is not None and twin.tail_parts == 8
    case = TailCase("topk", config, 2048, tail=6, weighted=True)
    d = _setup(case, gen, top_k=4)
    outs = [gemm_topk_sum(d.a, d.weight, *d.route, d.topk_weights, d.topk_ids, block_m=config.block_m, config=c)
            for c in (config, twin)]
    torch.cuda.synchronize()
    assert torch.equal(outs[0], outs[1]), "the epilogue top-k sum differs from the two steps"
    rows = reference.indexed_gemm(d.a, d.quantized, *d.route, block_m=config.block_m, top_k=1,
                                  topk_weights=d.topk_weights)
    ref = rows.float().view(*d.topk_ids.shape, -1).sum(dim=1)
    assert _rel_err(outs[0], ref) <= REL_TOL



@pytest.mark.parametrize("blocks", [False, True], ids=["along_k", "into_blocks"])
def test_split_tail_in_the_contiguous_mode(blocks: bool) -> None:
    """The grouped contiguous mode's 64 x 2 items (rows by tensor copies, each block's expert read
    from ``m_indices`` in the kernel) cut the same ways, through ``grouped.contiguous(config=)``:
    against the reference with poisoned outputs (padding rows untouched), repeated runs identical;
    cut along K, the tail's slots and only they written and the counters back at zero; cut into
    blocks, the bits of the uncut items. A configuration whose blocks could span two experts'
    segments refused."""
    gen = torch.Generator(device="cuda").manual_seed(55)
    config = _blocks(_kimi(7168, 2048, 64, 128.0)) if blocks else _kimi(7168, 2048, 64, 128.0)
    assert config.items == 2 and config.block_m == 64, "one 128-row segment per item"
    experts, k, sms = 48, 2048, hardware.num_sms(torch.cuda.current_device())
    total = 2 * sms + 9
    counts = _counts(total, experts, config, 1, gen)
    ids = torch.repeat_interleave(torch.arange(experts, device="cuda"), torch.tensor(counts, device="cuda"))
    ids = ids[torch.randperm(ids.numel(), generator=gen, device="cuda")]
    c = routing.contiguous_layout(ids.view(-1, 1), experts)
    m = c.m_indices.numel()
    assert m == 128 * total, "an item per 128-row segment"
    packed, scales = _weights(experts, config.block_n, k, gen)  # one N tile
    w = chord_kernels.pack("contiguous", packed, scales, profile="h200_ep8")
    launch = plan(w, block_m=config.block_m, capacity=m // config.block_m, config=config)
    full, parts = config.tail_cut(total, launch.grid, k)
    assert parts > 1 and total - full == 9, "the draw leaves a sparse tail"
    ws = new_workspace(launch.workspace_bytes)
    ws[COUNTER_BYTES:].fill_(0xFF)
    a = torch.randn(m, k, generator=gen, device="cuda").to(torch.bfloat16)
    outs = []
    for _ in range(2):
        out = torch.full((m, config.block_n), float("nan"), dtype=torch.bfloat16, device="cuda")
        grouped.contiguous(a, w, c.m_indices, out=out, workspace=ws, config=config)
        outs.append(out)
    torch.cuda.synchronize()
    if not blocks:
        written = _slots_written(ws, config, launch.grid)
        assert all(written[:9 * parts]) and not any(written[9 * parts:]), "the tail's parts, and only they, use slots"
        assert not bool(ws[:COUNTER_BYTES].view(torch.int32).any()), "every counter back at zero"
    real = c.m_indices >= 0
    ref = reference.grouped_contiguous(a, (packed, scales), c.m_indices)
    assert not outs[0][real].isnan().any(), "real rows never written"
    assert outs[0][~real].isnan().all(), "padding rows were written"
    assert _rel_err(outs[0][real], ref[real]) <= REL_TOL
    assert torch.equal(outs[0][real], outs[1][real]), "repeated runs differ"
    if blocks:
        uncut = grouped.contiguous(a, w, c.m_indices, config=dataclasses.replace(config, tail_parts=0, tail_blocks=False))
        assert torch.equal(outs[0][real], uncut[real]), "the cut items' bits differ from the uncut items'"
    with pytest.raises(ChordInputError, match="dividing the 128-row segments"):
        grouped.contiguous(a, w, c.m_indices, config=WgmmaConfig(48, 2, 256, 2))


@pytest.mark.parametrize("case", BLOCK_CASES, ids=[c.name for c in BLOCK_CASES])
def test_split_tail_into_blocks_is_the_uncut_bits(case: TailCase) -> None:
    """The tail's items cut into runs of their routing blocks (``tail_blocks``): every row written
    (poisoned outputs), the bits of the uncut configuration, the reference within its bound,
    repeated runs identical, no workspace beyond the schedule's."""
    gen = torch.Generator(device="cuda").manual_seed(sum(map(ord, case.name)))
    d = _setup(case, gen)
    config = case.config
    uncut = dataclasses.replace(config, tail_parts=0, tail_blocks=False)
    assert _workspace(d, config).numel() == _workspace(d, uncut).numel(), "no partials, no arrival counters"
    run = dict(block_m=config.block_m, top_k=1, topk_weights=d.topk_weights)
    outs = []
    for cfg in (config, config, uncut):
        out = torch.full((d.a.shape[0], d.weight.n), float("nan"), dtype=torch.bfloat16, device="cuda")
        gemm(d.a, d.weight, *d.route, out=out, config=cfg, **run)
        outs.append(out)
    torch.cuda.synchronize()
    nan_rows = outs[0].isnan().any(dim=1).nonzero().flatten().tolist()
    assert not nan_rows, f"{len(nan_rows)} output rows never written, e.g. {nan_rows[:8]}"
    assert torch.equal(outs[0], outs[1]), "repeated runs differ"
    assert torch.equal(outs[0], outs[2]), "the cut items' bits differ from the uncut items'"
    ref = reference.indexed_gemm(d.a, d.quantized, *d.route, **run)
    assert _rel_err(outs[0], ref) <= REL_TOL
