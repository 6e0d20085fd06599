"""The indexed decode kernel against the reference on a GPU: fresh random data, poisoned outputs."""

from __future__ import annotations

import dataclasses
import warnings
import zlib

import pytest
import torch

import chord_kernels
from chord_kernels import indexed, reference
from chord_kernels.errors import ChordInputError, ChordLayoutError, ChordPerformanceWarning
from chord_kernels.formats import random_quantized
from chord_kernels.indexed import choose_config, fused_moe, gemm
from chord_kernels.indexed.decode import DecodeConfig
from chord_kernels.routing import align_block_size

pytestmark = pytest.mark.gpu
REL_TOL = 5e-3


def _weights(e: int, n: int, k: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Uniform random codes and scales in [0.5, 1.5] * 0.02, on the GPU."""
    return random_quantized(e, n, k, generator=gen, device="cuda")


def _rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out.float() - ref.float()).norm() / ref.float().norm().clamp_min(1e-30)).item()


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    experts: int
    n: int
    k: int
    rows: int
    top_k: int
    block_m: int = 8
    routing: str = "uniform"  # uniform | hot | sparse | mapped
    weighted: bool = False
    schedule: str | None = None  # None: the default configuration's
    config: DecodeConfig | None = None  # instead of the default configuration


CASES = [
    Case("ep8_gate_up", 48, 4096, 7168, 160, 1),
    Case("ep8_down_weighted", 48, 7168, 2048, 160, 1, weighted=True),
    Case("tp8_gate_up", 384, 512, 7168, 160, 8),
    Case("tp8_down_weighted", 384, 7168, 256, 1280, 1, weighted=True),
    Case("ep8_tok16_bm32", 48, 4096, 7168, 768, 1, block_m=32),
    Case("odd_bm8", 5, 40, 96, 7, 3),
    Case("odd_bm16", 5, 40, 96, 7, 3, block_m=16),
    Case("odd_bm24_weighted", 5, 72, 160, 11, 2, block_m=24, weighted=True),
    Case("odd_bm32", 3, 24, 32, 9, 2, block_m=32),
    Case("m1", 6, 16, 32, 1, 2),
    Case("one_hot_expert", 4, 72, 160, 50, 1, routing="hot"),
    Case("empty_experts", 8, 48, 224, 20, 2, routing="sparse"),
    Case("expert_map", 16, 48, 64, 33, 4, routing="mapped", weighted=True),
    Case("expert_map_bm16", 16, 136, 320, 40, 4, block_m=16, routing="mapped"),
    Case("dynamic_schedule", 24, 256, 1024, 96, 2, schedule="dynamic"),
    Case("strided_schedule", 24, 256, 1024, 96, 2, weighted=True, schedule="strided"),
    # Few local blocks, K = 2048 (4 stages per item), a grid sized for every routing block: most
    # items are split along K over several CTAs (partials, flags, owner combine).
    Case("balanced_split_k", 8, 64, 2048, 12, 2, routing="mapped", weighted=True, schedule="balanced"),
    # The wide decode tile (256 channels, balanced) with a partial last N tile (N16 = 17: one
    # atom row in its last 64-channel run) and a one-group last K tile (K / 32 = 33).
    Case("wide_tile_edges", 6, 264, 1056, 20, 2, weighted=True),
    # The 128-channel configuration of 16-32 token blocks: partial last N tile and K stage.
    Case("wide_bm24_edges", 6, 200, 1056, 40, 3, block_m=24, weighted=True),
    Case("wide_bm32_k256", 12, 264, 256, 60, 4, block_m=32, weighted=True),
    # 48- and 64-token blocks (two token rows per producer lane): the 192-channel one-CTA config
    # with partial tiles and split items, the K = 256 config, and the general config with odd N / K.
    Case("bm48_wide", 6, 264, 1056, 100, 2, block_m=48, weighted=True),
    Case("bm64_wide_split", 8, 512, 2048, 200, 2, block_m=64, routing="mapped", weighted=True, schedule="balanced"),
    Case("bm64_k256", 16, 384, 256, 300, 2, block_m=64, weighted=True),
    Case("bm64_general_odd", 5, 72, 160, 40, 3, block_m=64),
    # N not a multiple of 8: rows are not 16-byte aligned, the epilogue stores element by element.
    Case("n_not_multiple_of_8", 5, 44, 96, 7, 3, weighted=True),
    Case("n_not_multiple_of_8_wide", 6, 268, 1056, 20, 2),
    Case("balanced_split_k_bm16", 6, 136, 1280, 30, 3, block_m=16, routing="mapped", schedule="balanced"),
    # Row widths (an item multiplies only the token tiles up to its last real row): blocks of 1-32
    # real rows, an expert map, a partial last N tile, items split along K, TP8's down.
    Case("row_widths_bm16", 12, 4096, 2048, 70, 1, block_m=16, weighted=True,
         config=DecodeConfig(block_m=16, mt=4, bk=256, stages=2, ctas_per_sm=2, row_widths=True)),
    Case("row_widths_bm16_split", 8, 264, 2048, 40, 2, block_m=16, routing="mapped",
         config=DecodeConfig(block_m=16, mt=4, bk=256, stages=2, ctas_per_sm=2, schedule="balanced", row_widths=True)),
    Case("row_widths_bm24_edges", 6, 200, 1056, 40, 3, block_m=24, weighted=True,
         config=DecodeConfig(block_m=24, mt=2, bk=256, stages=3, ctas_per_sm=2, row_widths=True)),
    Case("row_widths_tp8_down_bm32", 384, 7168, 256, 1000, 8, block_m=32, routing="mapped", weighted=True,
         config=DecodeConfig(block_m=32, warps=8, mt=4, bk=256, stages=2, ctas_per_sm=1, row_widths=True)),
]


def _shuffled_blocks(r, block_m: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, int]:
    """``align_block_size``'s routing ``r`` with its used blocks in a random order (an expert's blocks in several
    runs, as the contract allows): sorted token ids, expert ids, and the used block count."""
    used = int(r.num_tokens_post_padded.item()) // block_m
    order = torch.randperm(used, generator=gen, device="cuda")
    sorted_ids = r.sorted_token_ids.clone()
    sorted_ids[:used * block_m] = r.sorted_token_ids[:used * block_m].view(used, block_m)[order].flatten()
    expert_ids = r.expert_ids.clone()
    expert_ids[:used] = r.expert_ids[:used][order]
    return sorted_ids, expert_ids, used


def _routing(case: Case, gen: torch.Generator):
    """topk_ids over the global experts and the expert_map (None unless the case maps experts)."""
    global_e = case.experts * 4 if case.routing == "mapped" else case.experts
    if case.routing == "hot":
        ids = torch.full((case.rows, case.top_k), 2, dtype=torch.int64, device="cuda")
    elif case.routing == "sparse":
        pick = torch.tensor([0, 3], device="cuda")
        ids = pick[torch.randint(0, 2, (case.rows, case.top_k), generator=gen, device="cuda")]
    else:
        # Distinct experts per row (as a real router picks), uniform over the global experts.
        ids = torch.rand(case.rows, global_e, generator=gen, device="cuda").argsort(dim=1)[:, :case.top_k]
    expert_map = None
    if case.routing == "mapped":
        expert_map = torch.full((global_e,), -1, dtype=torch.int32, device="cuda")
        local = torch.randperm(global_e, generator=gen, device="cuda")[:case.experts]
        expert_map[local] = torch.arange(case.experts, dtype=torch.int32, device="cuda")
    return ids, global_e, expert_map


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_gemm_matches_reference(case: Case) -> None:
    gen = torch.Generator(device="cuda").manual_seed(zlib.crc32(case.name.encode()))
    packed, scales = _weights(case.experts, case.n, case.k, gen)
    profile = "h200_tp8" if case.name.startswith("tp8") else "h200_ep8"
    pw = chord_kernels.pack("indexed", packed, scales, profile=profile)
    ids, global_e, expert_map = _routing(case, gen)
    r = align_block_size(ids, case.block_m, global_e, expert_map)
    a = torch.randn(case.rows, case.k, generator=gen, device="cuda").to(torch.bfloat16)
    tw = torch.rand(case.rows, case.top_k, generator=gen, device="cuda") if case.weighted else None
    config = None
    if case.schedule is not None:
        config = dataclasses.replace(choose_config(case.n, case.k, case.block_m), schedule=case.schedule)
    config = case.config or config
    args = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    outs = []
    for _ in range(2):
        out = torch.full((case.rows * case.top_k, case.n), float("nan"), dtype=torch.bfloat16, device="cuda")
        gemm(a, pw, *args, block_m=case.block_m, top_k=case.top_k, topk_weights=tw, out=out, config=config)
        outs.append(out)
    torch.cuda.synchronize()
    ref = reference.indexed_gemm(a, (packed, scales), *args, block_m=case.block_m, top_k=case.top_k,
                                 topk_weights=tw)
    assert not outs[0].isnan().any(), "some output rows were never written"
    assert _rel_err(outs[0], ref) <= REL_TOL
    assert torch.equal(outs[0], outs[1]), "repeated runs differ"
    zero_rows = (ref == 0).all(dim=1)
    if case.routing == "mapped":
        assert zero_rows.any()
        assert (outs[0][zero_rows] == 0).all(), "rows of non-local experts must be zero"


def test_default_output_and_weight_dtype_bf16() -> None:
    gen = torch.Generator(device="cuda").manual_seed(11)
    packed, scales = _weights(4, 32, 64, gen)
    pw = chord_kernels.pack("indexed", packed, scales, profile="h200_ep8")
    ids = torch.randint(0, 4, (9, 2), generator=gen, device="cuda")
    r = align_block_size(ids, 8, 4)
    a = torch.randn(9, 64, generator=gen, device="cuda").to(torch.bfloat16)
    tw = torch.rand(9, 2, generator=gen, device="cuda").to(torch.bfloat16)
    args = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    out = gemm(a, pw, *args, block_m=8, top_k=2, topk_weights=tw)
    ref = reference.indexed_gemm(a, pw, *args, block_m=8, top_k=2, topk_weights=tw)
    assert out.shape == (18, 32) and out.dtype == torch.bfloat16
    assert _rel_err(out, ref) <= REL_TOL


def _moe_case(gen: torch.Generator, e_local: int, e_global: int, hidden_size: int, inter: int, m: int,
              top_k: int) -> tuple:
    """A layer's weights (and packed twins, H200 EP8 profile), hidden states, and top-k ids over
    ``e_global`` experts with their router weights."""
    w13 = _weights(e_local, 2 * inter, hidden_size, gen)
    w2 = _weights(e_local, hidden_size, inter, gen)
    p13 = chord_kernels.pack("indexed", *w13, profile="h200_ep8")
    p2 = chord_kernels.pack("indexed", *w2, profile="h200_ep8")
    hidden = torch.randn(m, hidden_size, generator=gen, device="cuda").to(torch.bfloat16)
    ids = torch.rand(m, e_global, generator=gen, device="cuda").argsort(dim=1)[:, :top_k].to(torch.int32)
    weights = torch.rand(m, top_k, generator=gen, device="cuda")
    return w13, w2, p13, p2, hidden, ids, weights


@pytest.mark.parametrize("mapped", [False, True])
def test_fused_moe_matches_reference(mapped: bool) -> None:
    gen = torch.Generator(device="cuda").manual_seed(5 + mapped)
    e_local, hidden_size, inter, m, top_k = 8, 512, 128, 13, 3
    e_global = 32 if mapped else e_local
    w13, w2, p13, p2, hidden, ids, weights = _moe_case(gen, e_local, e_global, hidden_size, inter, m, top_k)
    expert_map = None
    if mapped:
        expert_map = torch.full((e_global,), -1, dtype=torch.int64, device="cuda")
        expert_map[torch.arange(0, e_global, 4, device="cuda")] = torch.arange(e_local, device="cuda")
    out = fused_moe(hidden, p13, p2, weights, ids, global_num_experts=e_global, expert_map=expert_map)
    ref = reference.moe_layer(hidden, w13, w2, weights, ids, global_num_experts=e_global,
                              expert_map=expert_map)
    assert out.shape == (m, hidden_size) and out.dtype == torch.bfloat16
    assert _rel_err(out, ref) <= REL_TOL


ROUTING_ORDER = [  # name, local experts, global experts, H, I, tokens, top_k
    ("tok_e_40", 8, 8, 1024, 256, 160, 2),  # 56-token blocks
    ("tok_e_100_mapped", 8, 16, 1024, 256, 800, 2),  # 64 x 2 items, expert_map
    ("tok_e_130", 8, 8, 1024, 256, 520, 2),  # 16 x 10 items (fewer than 256 experts), the weight ring
    ("tok_e_153", 8, 8, 1024, 256, 612, 2),  # 24 x 7 items past 150 rows per expert (fewer than 256 experts)
    ("tok_e_90_many", 256, 256, 1024, 256, 11520, 2),  # 104-token blocks past the tile's 86.6 (256 experts and more)
    ("tok_e_150_many", 256, 256, 1024, 256, 19200, 2),  # 88-token blocks, one per item (256 experts and more)
    ("tok_e_21_many", 256, 256, 2048, 256, 2688, 2),  # 32-token blocks, the down in runs on four warpgroups (K = 256)
]
ROUTING_ORDER_BLOCKS = [(case, None) for case in ROUTING_ORDER] + [(ROUTING_ORDER[2], 24)]
"""The planned block, and at 130 rows per expert also 24-token blocks (the 24 x 7 items of 256 experts and more)."""


@pytest.mark.parametrize(("case", "block"), ROUTING_ORDER_BLOCKS,
                         ids=[c[0] + (f"_bm{b}" if b else "") for c, b in ROUTING_ORDER_BLOCKS])
def test_moe_experts_in_routing_order_is_the_slot_order_layer(case: tuple, block: int | None) -> None:
    """At WGMMA block sizes moe_experts writes gate_up's rows in routing order and loads them in
    blocks with tensor copies: bit for bit the layer through slot order (gemm + gemm_topk_sum),
    and gemm(out_position=True) puts slot sorted_token_ids[i]'s row at row i, padding untouched."""
    name, e_local, e_global, hidden_size, inter, m, top_k = case
    gen = torch.Generator(device="cuda").manual_seed(zlib.crc32(name.encode()))
    w13, w2, p13, p2, hidden, ids, weights = _moe_case(gen, e_local, e_global, hidden_size, inter, m, top_k)
    expert_map = None
    if e_global != e_local:
        expert_map = torch.full((e_global,), -1, dtype=torch.int32, device="cuda")
        expert_map[torch.arange(0, e_global, 2, device="cuda")] = torch.arange(e_local, dtype=torch.int32,
                                                                               device="cuda")
    local_slots = m * top_k * e_local // e_global
    block_m = block or min(indexed.choose_block_m(p13, local_slots), indexed.choose_block_m(p2, local_slots))
    assert block_m >= 24 or (block_m == 16 and local_slots > 120 * e_local)  # the WGMMA kernel for both GEMMs
    r = align_block_size(ids, block_m, e_global, expert_map)
    route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    got = indexed.moe_experts(hidden, p13, p2, route, weights, ids, block_m=block_m, expert_map=expert_map)
    act = gemm(hidden, p13, *route, block_m=block_m, top_k=top_k, activation="silu", zero_nonlocal=False)
    want = indexed.gemm_topk_sum(act, p2, *route, weights, ids, block_m=block_m, expert_map=expert_map)
    assert torch.equal(got, want)
    ref = reference.moe_layer(hidden, w13, w2, weights, ids, global_num_experts=e_global, expert_map=expert_map)
    assert _rel_err(got, ref) <= REL_TOL
    # The gate_up output in routing order: real entries of local blocks hold their slot's row.
    rows = indexed.routing_capacity(r.sorted_token_ids, r.expert_ids, block_m) * block_m
    ordered = torch.full((rows, inter), float("nan"), dtype=torch.bfloat16, device="cuda")
    gemm(hidden, p13, *route, block_m=block_m, top_k=top_k, activation="silu", zero_nonlocal=False, out=ordered,
         out_position=True)
    entries = r.sorted_token_ids[:rows].long()
    local = (r.expert_ids >= 0).repeat_interleave(block_m)[: entries.numel()]
    used = torch.arange(entries.numel(), device="cuda") < r.num_tokens_post_padded.item()
    real = (entries < m * top_k) & local & used
    assert torch.equal(ordered[real], act[entries[real]])
    assert ordered[~real].isnan().all(), "padding entries and non-local blocks were written"
    # The down GEMM alone from those rows (routing_order): its slot-order output, bit for bit.
    slots = m * top_k
    by_slot = gemm(act, p2, *route, block_m=block_m, top_k=1, topk_weights=weights)
    from_order = torch.full((slots, hidden_size), float("nan"), dtype=torch.bfloat16, device="cuda")
    gemm(ordered, p2, *route, block_m=block_m, top_k=1, topk_weights=weights, out=from_order, routing_order=True)
    assert torch.equal(from_order, by_slot)
    with pytest.raises(ChordInputError, match="routing_order: expected out"):
        gemm(ordered, p2, *route, block_m=block_m, top_k=1, routing_order=True)
    with pytest.raises(ChordInputError, match="a: expected a row per routing entry"):
        gemm(ordered[:-1], p2, *route, block_m=block_m, top_k=1, topk_weights=weights, out=from_order,
             routing_order=True)
    with pytest.raises(ChordInputError, match="routing order: the decode kernel"):
        r8 = align_block_size(ids, 8, e_global, expert_map)
        gemm(hidden, p13, r8.sorted_token_ids, r8.expert_ids, r8.num_tokens_post_padded, block_m=8, top_k=top_k,
             out_position=True)


def test_the_layer_launches_only_what_prepare_layer_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every kernel fused_moe launches, decode to prefill, by slot and in routing order, is one
    prepare_layer loads (indexed.api.layer_kernels, and the routing's): after it nothing compiles or
    loads at a first batch of a new size or inside a CUDA-graph capture."""
    from chord_kernels import hardware
    from chord_kernels.indexed import api
    from chord_kernels.jit import CudaKernel
    from chord_kernels.ops import align

    launched: list[CudaKernel] = []
    launch = CudaKernel.launch

    def record(self: CudaKernel, *args, **kwargs) -> None:
        launched.append(self)
        launch(self, *args, **kwargs)

    monkeypatch.setattr(CudaKernel, "launch", record)
    orders = set()
    for name, e_local, e_global, hidden_size, inter, m, top_k in (("decode", 8, 8, 1024, 256, 3, 2), *ROUTING_ORDER):
        gen = torch.Generator(device="cuda").manual_seed(zlib.crc32(name.encode()) + 1)
        w13, w2, p13, p2, hidden, ids, weights = _moe_case(gen, e_local, e_global, hidden_size, inter, m, top_k)
        expert_map = None
        if e_global != e_local:  # every other global expert local
            expert_map = torch.full((e_global,), -1, dtype=torch.int32, device="cuda")
            expert_map[::2] = torch.arange(e_local, dtype=torch.int32, device="cuda")
        launched.clear()
        out = fused_moe(hidden, p13, p2, weights, ids, global_num_experts=e_global, expert_map=expert_map)
        allowed = {*api.layer_kernels(p13, p2, hardware.arch(hidden.device.index)), *align.kernels()}
        assert launched and not [k.name for k in launched if k not in allowed], name
        orders.add(any(k.name == "indexed_wgmma" for k in launched))
        want = reference.moe_layer(hidden, w13, w2, weights, ids, global_num_experts=e_global, expert_map=expert_map)
        assert _rel_err(out, want) <= REL_TOL, name
    assert orders == {False, True}, "expected decode-kernel and WGMMA layers"


def test_cuda_graph_capture_and_replay() -> None:
    gen = torch.Generator(device="cuda").manual_seed(21)
    # K = 1024, N = 256: the default decode config (balanced schedule), whose split items pass
    # partials and flags between CTAs; replays must find every flag reset.
    e, n, k, rows, top_k, bm = 16, 256, 1024, 24, 4, 8
    packed, scales = _weights(e, n, k, gen)
    pw = chord_kernels.pack("indexed", packed, scales, profile="h200_ep8")
    ids = torch.rand(rows, e, generator=gen, device="cuda").argsort(dim=1)[:, :top_k]
    r = align_block_size(ids, bm, e)
    static = {"sorted": r.sorted_token_ids.clone(), "experts": r.expert_ids.clone(),
              "ntpp": r.num_tokens_post_padded.clone(),
              "a": torch.randn(rows, k, generator=gen, device="cuda").to(torch.bfloat16)}
    out = torch.empty(rows * top_k, n, dtype=torch.bfloat16, device="cuda")

    def run() -> None:
        gemm(static["a"], pw, static["sorted"], static["experts"], static["ntpp"], block_m=bm,
             top_k=top_k, out=out)

    run()  # compile + load before capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()
    for trial in range(3):
        ids = torch.rand(rows, e, generator=gen, device="cuda").argsort(dim=1)[:, :top_k]
        if trial == 2:
            ids[:] = torch.arange(top_k, device="cuda")  # hot experts: fewer blocks in use
        r = align_block_size(ids, bm, e)
        static["sorted"].copy_(r.sorted_token_ids)
        static["experts"].copy_(r.expert_ids)
        static["ntpp"].copy_(r.num_tokens_post_padded)
        static["a"].copy_(torch.randn(rows, k, generator=gen, device="cuda").to(torch.bfloat16))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        ref = reference.indexed_gemm(static["a"], (packed, scales), static["sorted"], static["experts"],
                                     static["ntpp"], block_m=bm, top_k=top_k)
        assert not out.isnan().any()
        assert _rel_err(out, ref) <= REL_TOL


def test_fused_moe_is_graph_capturable() -> None:
    gen = torch.Generator(device="cuda").manual_seed(23)
    e, hidden_size, inter, m, top_k = 8, 256, 64, 6, 2
    w13, w2 = _weights(e, 2 * inter, hidden_size, gen), _weights(e, hidden_size, inter, gen)
    p13 = chord_kernels.pack("indexed", *w13, profile="h200_ep8")
    p2 = chord_kernels.pack("indexed", *w2, profile="h200_ep8")
    hidden = torch.randn(m, hidden_size, generator=gen, device="cuda").to(torch.bfloat16)
    ids = torch.randint(0, e, (m, top_k), generator=gen, device="cuda")
    weights = torch.rand(m, top_k, generator=gen, device="cuda")
    fused_moe(hidden, p13, p2, weights, ids)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fused_moe(hidden, p13, p2, weights, ids)
    ids.copy_(torch.randint(0, e, (m, top_k), generator=gen, device="cuda"))
    hidden.copy_(torch.randn(m, hidden_size, generator=gen, device="cuda").to(torch.bfloat16))
    graph.replay()
    torch.cuda.synchronize()
    ref = reference.moe_layer(hidden, w13, w2, weights, ids)
    assert _rel_err(out, ref) <= REL_TOL


def test_errors_name_the_problem() -> None:
    gen = torch.Generator(device="cuda").manual_seed(3)
    packed, scales = _weights(2, 16, 64, gen)
    a = torch.randn(4, 64, device="cuda").to(torch.bfloat16)
    r = align_block_size(torch.zeros(4, 1, dtype=torch.int32, device="cuda"), 8, 2)
    args = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    blackwell = chord_kernels.pack("indexed", packed, scales, profile="b200_ep8")
    with pytest.raises(ChordLayoutError, match="b200_ep8"):
        gemm(a, blackwell, *args, block_m=8, top_k=1)
    ref_layout = chord_kernels.pack("reference", packed, scales, profile="any")
    with pytest.raises(ChordLayoutError, match="family"):
        gemm(a, ref_layout, *args, block_m=8, top_k=1)
    pw = chord_kernels.pack("indexed", packed, scales, profile="h200_ep8")
    with pytest.raises(ChordInputError, match="K=64"):
        gemm(a[:, :32].contiguous(), pw, *args, block_m=8, top_k=1)
    with pytest.raises(ChordInputError, match="out"):
        gemm(a, pw, *args, block_m=8, top_k=1, out=torch.empty(4, 8, dtype=torch.bfloat16, device="cuda"))
    with pytest.raises(ChordInputError, match="block_m"):
        gemm(a, pw, *args, block_m=12, top_k=1)


@pytest.mark.parametrize("m", [0, 1])
def test_empty_and_single_token_batches(m: int) -> None:
    """vLLM calls idle ranks with no tokens: every indexed op returns an empty result, no error."""
    gen = torch.Generator(device="cuda").manual_seed(31 + m)
    e, hidden_size, inter, top_k = 8, 256, 64, 2
    w13, w2 = _weights(e, 2 * inter, hidden_size, gen), _weights(e, hidden_size, inter, gen)
    p13 = chord_kernels.pack("indexed", *w13, profile="h200_ep8")
    p2 = chord_kernels.pack("indexed", *w2, profile="h200_ep8")
    hidden = torch.randn(m, hidden_size, generator=gen, device="cuda").to(torch.bfloat16)
    ids = torch.rand(m, e, generator=gen, device="cuda").argsort(dim=1)[:, :top_k]
    weights = torch.rand(m, top_k, generator=gen, device="cuda")
    r = align_block_size(ids, 8, e)
    args = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    out = gemm(hidden, p13, *args, block_m=8, top_k=top_k)
    assert out.shape == (m * top_k, 2 * inter)
    ref = reference.indexed_gemm(hidden, w13, *args, block_m=8, top_k=top_k)
    assert torch.equal(out, ref) if m == 0 else _rel_err(out, ref) <= REL_TOL
    layer = fused_moe(hidden, p13, p2, weights, ids)
    assert layer.shape == (m, hidden_size) and layer.dtype == torch.bfloat16
    if m:
        assert _rel_err(layer, reference.moe_layer(hidden, w13, w2, weights, ids)) <= REL_TOL


def _split_case(gen: torch.Generator):
    """A balanced-schedule GEMM whose items are split over CTAs (partials and arrival counters)."""
    e, n, k, rows, top_k = 8, 256, 2048, 12, 2
    packed, scales = _weights(e, n, k, gen)
    pw = chord_kernels.pack("indexed", packed, scales, profile="h200_ep8")
    ids = torch.rand(rows, e, generator=gen, device="cuda").argsort(dim=1)[:, :top_k]
    r = align_block_size(ids, 8, e)
    a = torch.randn(rows, k, generator=gen, device="cuda").to(torch.bfloat16)
    args = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    ref = reference.indexed_gemm(a, (packed, scales), *args, block_m=8, top_k=top_k)
    return pw, a, args, top_k, ref


def test_caller_owned_workspace() -> None:
    gen = torch.Generator(device="cuda").manual_seed(41)
    pw, a, args, top_k, ref = _split_case(gen)
    plan = indexed.plan(pw, block_m=8, capacity=indexed.routing_capacity(args[0], args[1], 8))
    assert plan.config.schedule == "balanced" and plan.workspace_bytes > 0
    ws = indexed.new_workspace(indexed.max_workspace_bytes(pw), a.device)
    assert ws.numel() >= plan.workspace_bytes and ws.dtype == torch.uint8 and not ws.any()
    ws[plan.workspace.partials_offset:].fill_(0xFF)  # scratch needs no initial value
    out = gemm(a, pw, *args, block_m=8, top_k=top_k, workspace=ws)
    again = gemm(a, pw, *args, block_m=8, top_k=top_k)  # the default workspace
    torch.cuda.synchronize()
    assert _rel_err(out, ref) <= REL_TOL and torch.equal(out, again)
    assert not ws[: plan.workspace.zeroed_bytes].any(), "every launch leaves its counters zero"
    with pytest.raises(ChordInputError, match="workspace: expected at least"):
        gemm(a, pw, *args, block_m=8, top_k=top_k, workspace=ws[:16])
    with pytest.raises(ChordInputError, match="workspace: expected a tensor on cuda"):
        gemm(a, pw, *args, block_m=8, top_k=top_k, workspace=ws.cpu())


def test_two_streams_in_flight_use_two_workspaces() -> None:
    gen = torch.Generator(device="cuda").manual_seed(43)
    pw, a, args, top_k, ref = _split_case(gen)
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    outs = [[torch.full_like(ref, float("nan")) for _ in range(20)] for _ in streams]
    torch.cuda.synchronize()
    for i in range(20):  # both streams' launches overlap; each stream has its own default workspace
        for s, stream in enumerate(streams):
            with torch.cuda.stream(stream):
                gemm(a, pw, *args, block_m=8, top_k=top_k, out=outs[s][i])
    torch.cuda.synchronize()
    for per_stream in outs:
        for out in per_stream:
            assert torch.equal(out, per_stream[0])
    assert _rel_err(outs[0][0], ref) <= REL_TOL
    from chord_kernels.indexed import workspace

    keys = {(a.device.index, s.cuda_stream) for s in streams}
    assert keys <= set(workspace._DEFAULTS)
    assert len({workspace._DEFAULTS[key].data_ptr() for key in keys}) == 2


def test_capture_uses_the_prepared_workspace_of_its_stream() -> None:
    gen = torch.Generator(device="cuda").manual_seed(47)
    pw, a, args, top_k, ref = _split_case(gen)
    out = torch.empty_like(ref)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        indexed.prepare(pw, 8, a.device)
        graph = torch.cuda.CUDAGraph()
        with warnings.catch_warnings():
            warnings.simplefilter("error", ChordPerformanceWarning)  # no memset fallback
            with torch.cuda.graph(graph, stream=stream):
                gemm(a, pw, *args, block_m=8, top_k=top_k, out=out)
    for _ in range(3):
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert _rel_err(out, ref) <= REL_TOL
    # Captured on a stream nothing prepared: correct too, through a graph-owned workspace, with a warning.
    other = torch.cuda.CUDAGraph()
    with pytest.warns(ChordPerformanceWarning, match="workspace="), torch.cuda.graph(other):
        gemm(a, pw, *args, block_m=8, top_k=top_k, out=out)
    out.fill_(float("nan"))
    other.replay()
    torch.cuda.synchronize()
    assert _rel_err(out, ref) <= REL_TOL


def test_launches_of_different_grids_share_one_workspace() -> None:
    # A launch's grid shrinks with its routing tensors; its split-K partials must never land where
    # a larger-grid launch keeps its arrival counters (they are only reset, never zeroed again).
    gen = torch.Generator(device="cuda").manual_seed(43)
    n, k = 512, 1024
    cases = []
    for experts, rows in ((4, 1), (64, 48)):  # grid 6 (3 blocks x 2 N tiles), then the full grid
        packed, scales = _weights(experts, n, k, gen)
        pw = chord_kernels.pack("indexed", packed, scales, profile="h200_ep8")
        ids = torch.rand(rows, experts, generator=gen, device="cuda").argsort(dim=1)[:, :1]
        r = align_block_size(ids, 8, experts)
        a = torch.randn(rows, k, generator=gen, device="cuda").to(torch.bfloat16)
        args = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
        plan = indexed.plan(pw, block_m=8, capacity=indexed.routing_capacity(args[0], args[1], 8))
        assert plan.config.schedule == "balanced"
        ref = reference.indexed_gemm(a, (packed, scales), *args, block_m=8, top_k=1)
        cases.append((pw, a, args, ref, plan.grid))
    assert cases[0][4] < cases[1][4]
    ws = indexed.new_workspace(max(indexed.max_workspace_bytes(c[0]) for c in cases), "cuda")
    for _ in range(3):
        for pw, a, args, ref, _grid in cases:
            out = gemm(a, pw, *args, block_m=8, top_k=1, workspace=ws)
            torch.cuda.synchronize()
            assert _rel_err(out, ref) <= REL_TOL
