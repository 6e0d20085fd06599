"""The launch plan (host arithmetic only): configuration, grid, shared memory and workspace."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

import chord_kernels
from chord_kernels import ChordInputError, grouped, hardware, indexed
from chord_kernels.formats import random_quantized
from chord_kernels.indexed import api
from chord_kernels.indexed.args import ARGS, prelude
from chord_kernels.indexed.decode import LIST_CAP_LIMIT
from chord_kernels.indexed.heuristics import choose_config, general_config, short_k_config
from chord_kernels.indexed.planner import config_for_rows, configs_for, silu_mul_twin
from chord_kernels.indexed.wgmma import (
    TAIL_CUT_MAX_BLOCK,
    TAIL_CUT_PARTS,
    WgmmaConfig,
    block_rows_wide_configs,
    choose_wgmma_config,
    wide16_config,
)
from chord_kernels.indexed.workspace import (
    COUNTER_BYTES,
    WorkspaceLayout,
    check_workspace,
    new_workspace,
)
from chord_kernels.jit import ArgStruct, Field
from chord_kernels.jit.args import TMA_DESCRIPTOR
from chord_kernels.ops.activation import silu_and_mul_kernel
from chord_kernels.ops.topk import local_topk_sum_kernel
from chord_kernels.routing import CONTIGUOUS_ALIGNMENT

SMS = 132
KIMI = [(4096, 7168), (7168, 2048), (512, 7168), (7168, 256)]


def _weight(n: int, k: int, experts: int = 2) -> chord_kernels.PackedWeight:
    """A weight of shape N x K without packing real data (planning reads only its metadata)."""
    return chord_kernels.PackedWeight(layout="indexed", family="indexed", mode="indexed", profile="h200_ep8",
                                      layout_version=2, num_experts=experts, n=n, k=k, group_size=32,
                                      tensors={})


def _plan(n: int, k: int, block_m: int, capacity: int, arch: str = "sm_90a", **kw) -> indexed.LaunchPlan:
    return indexed.plan(_weight(n, k), block_m=block_m, capacity=capacity, num_sms=SMS, arch=arch, **kw)


@pytest.mark.parametrize("block_m", indexed.BLOCK_MS)
@pytest.mark.parametrize(("n", "k"), [*KIMI, (40, 96), (264, 1056)])
@pytest.mark.parametrize("capacity", [1, 62, 496, 5000, LIST_CAP_LIMIT + 1])
def test_plans_fit_the_gpu_and_the_work(n: int, k: int, block_m: int, capacity: int) -> None:
    plan = _plan(n, k, block_m, capacity)
    cfg = plan.config
    assert cfg.block_m == block_m
    assert cfg in indexed.configs_for(n, k, block_m, "sm_90a")
    assert plan.smem == cfg.smem_bytes(plan.list_cap) <= cfg.per_cta_budget()
    if isinstance(cfg, indexed.WgmmaConfig):  # as many items as fit, walking the blocks beyond
        assert plan.list_cap == min(capacity, (cfg.per_cta_budget() - cfg.smem_bytes(0)) // 4) > 0
    else:
        assert plan.list_cap in (0, capacity)
        assert capacity <= LIST_CAP_LIMIT or plan.list_cap == 0
    assert 1 <= plan.grid <= min(SMS * cfg.ctas_per_sm, capacity * cfg.ntiles(n))
    assert plan.grid % cfg.cluster == 0  # whole clusters (cta_pair: two CTAs)
    assert plan.threads == cfg.threads
    assert plan.workspace == cfg.workspace(plan.grid)
    assert plan.workspace_bytes <= indexed.max_workspace_bytes(_weight(n, k), num_sms=SMS, arch="sm_90a")
    assert plan is _plan(n, k, block_m, capacity)  # memoized


def test_kimi_decode_plans() -> None:
    # ep8_decode gate_up: 160 slots on 48 experts -> 62 routing blocks of 8: the wide balanced tile.
    gate_up = _plan(4096, 7168, 8, 62)
    assert gate_up.config == choose_config(4096, 7168, 8) and gate_up.config.schedule == "balanced"
    assert gate_up.grid == 2 * SMS
    assert gate_up.workspace == WorkspaceLayout(flags=2 * SMS * 4, partials=2 * 2 * SMS * 256 * 8)
    # EP8 down has 28 N tiles per block: many items per CTA, whole items in a strided order.
    down = _plan(7168, 2048, 8, 62)
    assert down.config == dataclasses.replace(choose_config(7168, 2048, 8), schedule="strided")
    assert down.workspace_bytes == 0
    # A routing-block list that does not fit beside the wide tile's stages: the general config
    # (on Blackwell: on sm_90a 64-token blocks go to the WGMMA kernel).
    assert _plan(4096, 7168, 64, 6000, arch="sm_100a").config == general_config(64)


def test_sm90a_plans_the_wgmma_kernel_from_24_token_blocks_and_16_from_k_2048() -> None:
    from chord_kernels.indexed import WgmmaConfig, choose_wgmma_config

    assert not isinstance(_plan(4096, 7168, 8, 62).config, WgmmaConfig)
    for n, k in ((4096, 7168), (512, 7168), (512, 2048), (7168, 4096)):  # EP8 and TP8 gate_up, narrow N
        assert _plan(n, k, 16, 62).config == choose_wgmma_config(n, k, 16)
    for k in (256, 1024, 2048, 4064):  # TP8 and EP8 down, and K between: the decode kernel's wide tiles
        decode = _plan(7168, k, 16, 62).config
        assert decode == short_k_config(7168, 16) and decode.row_widths
    assert not isinstance(_plan(512, 1024, 16, 62).config, WgmmaConfig)  # below K = 2048
    # Up to 8 expected rows per expert the gate_up's 16-token blocks take the decode kernel's wide
    # tiles too (wide N only), with SiLU-and-mul fused there and not on its other tiles.
    low = config_for_rows(4096, 7168, 16, "sm_90a", indexed.planner.DECODE_BLOCK16_MAX_TOK_E)
    assert low == short_k_config(4096, 16) and low in configs_for(4096, 7168, 16, "sm_90a")
    assert config_for_rows(4096, 7168, 16, "sm_90a", 8.0) == low
    assert config_for_rows(4096, 7168, 16, "sm_90a", 8.5) is None
    assert config_for_rows(512, 7168, 16, "sm_90a", 2.0) is None and config_for_rows(7168, 2048, 16, "sm_90a", 2.0) is None
    assert silu_mul_twin(low, 4096) == dataclasses.replace(low, silu_mul=True)
    assert silu_mul_twin(dataclasses.replace(choose_config(4096, 7168, 8), schedule="strided"), 4096) is None
    assert silu_mul_twin(choose_config(4096, 7168, 8), 4096) is None  # balanced: items split along K
    assert silu_mul_twin(choose_wgmma_config(4096, 7168, 16), 4096).silu_mul
    assert not isinstance(_plan(4096, 7168, 16, 62, arch="sm_100a").config, WgmmaConfig)
    for block_m in (24, 32, 56, 64, 128, 144, 200):
        wg = _plan(4096, 7168, block_m, 300)
        assert wg.config == choose_wgmma_config(4096, 7168, block_m)
        # The dynamic counters; with the planned split tail (blocks up to 40 tokens: not the 24-token
        # blocks' wide items, tok_e unknown) its arrival counters and partials.
        cut = 24 < block_m <= TAIL_CUT_MAX_BLOCK
        layout = wg.config.workspace(SMS) if cut else WorkspaceLayout(counters=2)
        assert (wg.grid, wg.threads, wg.workspace) == (SMS, wg.config.threads, layout)
        assert wg.config.tail_parts == (TAIL_CUT_PARTS if cut else 0) and (layout.partials > 0) == cut
        assert wg.smem == wg.config.smem_bytes(300)
    assert _plan(7168, 256, 16, 300).workspace_bytes == 0  # K = 256, two warpgroups in turns: strided
    assert _plan(7168, 256, 64, 300).workspace == WorkspaceLayout(counters=2)  # four-warpgroup runs: dynamic
    blackwell = _plan(4096, 7168, 32, 300, arch="sm_100a").config
    assert not isinstance(blackwell, WgmmaConfig)
    with pytest.raises(ChordInputError, match="on sm_100a"):
        _plan(4096, 7168, 56, 300, arch="sm_100a")  # 56 rows: WGMMA only


def test_config_override_and_errors() -> None:
    dynamic = dataclasses.replace(general_config(16), schedule="dynamic")
    plan = _plan(512, 7168, 16, 100, config=dynamic)
    assert plan.config == dynamic and plan.workspace == WorkspaceLayout(counters=2)
    with pytest.raises(ChordInputError, match="block_m: expected one of"):
        _plan(512, 7168, 12, 100)
    with pytest.raises(ChordInputError, match="differs from block_m=8"):
        _plan(512, 7168, 8, 100, config=dynamic)
    with pytest.raises(ChordInputError, match="capacity"):
        _plan(512, 7168, 8, -1)
    with pytest.raises(ChordInputError, match="row_widths: expected a block of 16 tokens or more"):
        dataclasses.replace(general_config(8), row_widths=True)


def test_split_tail_planned_for_long_narrow_items_and_sizes_its_workspace() -> None:
    planned = choose_wgmma_config(4096, 7168, 24, tok_e=16.0)  # four warpgroups, 24 x 2 items, dynamic
    assert planned.tail_parts == TAIL_CUT_PARTS
    # Short K (the down), TP8's N, 48-token blocks, the 64 x 2 items, the weight ring: uncut.
    for n, k, block_m, tok_e in ((7168, 2048, 24, 16.0), (512, 7168, 24, 16.0), (4096, 7168, 48, 32.0),
                                 (4096, 7168, 64, 128.0), (4096, 7168, 24, 128.0)):
        assert choose_wgmma_config(n, k, block_m, tok_e).tail_parts == 0
    uncut = dataclasses.replace(planned, tail_parts=0)
    assert uncut.workspace(SMS) == WorkspaceLayout(counters=2)
    tail = planned
    plan = _plan(4096, 7168, 24, 300, config=tail)
    # The dynamic counters, one arrival counter per (tail item, consumer warpgroup) and one slot of
    # the widest item's fp32 accumulators per part: at most one part per CTA.
    assert plan.workspace == WorkspaceLayout(counters=2, flags=SMS * 4, partials=SMS * 512 * 48)
    assert plan.smem == planned.smem_bytes(300) and plan.grid == SMS
    assert tail.template_args().endswith(", 8") and tail.source() != uncut.source()
    # ep8_tok16's skewed gate_up: 400 items on 132 SMs, 28 stages of 256 K; the uncut kernel cuts nothing.
    assert (tail.tail_cut(400, SMS, 7168), uncut.tail_cut(400, SMS, 7168)) == ((396, 8), (400, 1))
    for bad in (dict(tail_parts=1), dict(tail_parts=33), dict(tail_parts=-2)):
        with pytest.raises(ChordInputError, match="tail_parts: expected 0, or 2..32"):
            dataclasses.replace(planned, **bad)
    with pytest.raises(ChordInputError, match="n_run=0"):
        dataclasses.replace(choose_wgmma_config(7168, 256, 64), tail_parts=4)  # runs of N tiles (K = 256)
    with pytest.raises(ChordInputError, match="weight_ring=False"):
        dataclasses.replace(block_rows_wide_configs(4096, 7168)[0], tail_parts=4)  # the wide items


def test_split_tail_into_blocks_needs_no_workspace() -> None:
    """``tail_blocks``: the tail's items cut into runs of routing blocks, items of their own, so the
    workspace is the uncut configuration's; refused without ``tail_parts``, for one-block items and
    where some narrower width has no K loop of its own (the wide items)."""
    planned = dataclasses.replace(choose_wgmma_config(4096, 7168, 24, tok_e=16.0), tail_parts=0)
    blocks = dataclasses.replace(planned, tail_parts=2, tail_blocks=True)
    assert blocks.workspace(SMS) == planned.workspace(SMS) == WorkspaceLayout(counters=2)
    assert blocks.tail_cut(400, SMS, 7168) == (396, 2), "at most the item's two blocks"
    assert blocks.template_args().endswith(", 2, true") and blocks.source() != planned.source()
    assert dataclasses.replace(planned, tail_parts=2).template_args().endswith(", 2")
    for bad in (dict(tail_parts=0, tail_blocks=True), dict(items=1, tail_parts=2, tail_blocks=True)):
        with pytest.raises(ChordInputError, match="tail_blocks: expected"):
            dataclasses.replace(planned, **bad)
    with pytest.raises(ChordInputError, match="tail_blocks: expected"):
        dataclasses.replace(block_rows_wide_configs(4096, 7168)[0], tail_parts=4, tail_blocks=True)


def test_contiguous_mode_takes_wide_items_where_experts_pass_one_segment() -> None:
    """grouped.contiguous_config: on sm_90a for 121-150 expected rows per expert where some expert
    holds a second 128-row segment, the wide items — 16-row blocks up to 142 rows per expert, 32-row
    blocks beyond — and the 64 x 2 plan elsewhere; the family's precompile hook builds them (tensor
    copies, SiLU twin, one-fma twins) and they plan."""
    e = 48
    for n, k in KIMI[:2]:
        w = _weight(n, k, e)
        past = 128 * (e + 1)
        fine, coarse = grouped.contiguous_config(w, past, 142, "sm_90a"), grouped.contiguous_config(w, past, 143, "sm_90a")
        assert (fine.block_m, fine.items, fine.widths) == (16, 10, (8, 9, 10))
        assert (coarse.block_m, coarse.items, coarse.widths) == (32, 5, (2, 4, 5))
        assert block_rows_wide_configs(n, k) == (fine, coarse)
        for wide in (fine, coarse):
            assert (wide.tile, wide.mt) == (160, 2) and CONTIGUOUS_ALIGNMENT % wide.block_m == 0
            assert wide.tma_rows and wide.weight_ring and wide.dynamic and wide.reads_contiguous_rows
            assert _plan(n, k, wide.block_m, past // wide.block_m, config=wide).config == wide
        for expected_m, m, arch in ((120, past, "sm_90a"), (151, past, "sm_90a"), (None, past, "sm_90a"),
                                    (135, 128 * e, "sm_90a"), (135, past, "sm_100a")):
            assert grouped.contiguous_config(w, m, expected_m, arch) is None, (expected_m, m, arch)
        assert grouped.contiguous_config(w, past, 121, "sm_90a") == fine
        assert grouped.contiguous_config(w, past, 150, "sm_90a") == coarse
        sources = {kk.source for kk in grouped.kernels("sm_90a")}
        twins = [fine, coarse, *(dataclasses.replace(c, subnormal=True) for c in (fine, coarse))]
        if n == 4096:
            twins += [dataclasses.replace(t, silu_mul=True) for t in twins]
        assert all(t.kernel().source in sources for t in twins)
    assert not any("chord::indexed::WgmmaConfig<32, 5" in kk.source or "chord::indexed::WgmmaConfig<16, 10" in kk.source
                   for kk in grouped.kernels("sm_100a"))


def test_contiguous_mode_cuts_a_sparse_last_round_into_blocks() -> None:
    """grouped.contiguous_tail_config: the 64 x 2 plan with its last round's items cut into single
    blocks exactly where the host's tail_cut says that round is sparse and the launch is at most
    TAIL_BLOCKS_MAX_ROUNDS rounds (one item per 128-row segment and N tile), on sm_90a only; the
    precompile hook holds the cut kernels, gate_up's with the fused SiLU-and-mul too."""
    from chord_kernels.grouped.api import TAIL_BLOCKS_MAX_ROUNDS, blocks_cut

    cases = 0
    for n, k in KIMI[:2]:
        for experts in (12, 48):
            w = _weight(n, k, experts)
            for segments in (*range(experts, 4 * experts + 1, 7), 8 * experts, 20 * experts):
                m = 128 * segments
                launch = _plan(n, k, 64, m // 64)
                plain = launch.config
                assert (plain.block_m, plain.items) == (64, 2)
                items = segments * plain.ntiles(n)
                _, parts = blocks_cut(plain).tail_cut(items, launch.grid, k)
                want = parts > 1 and items <= TAIL_BLOCKS_MAX_ROUNDS * SMS and segments <= launch.list_cap
                cut = grouped.contiguous_tail_config(w, m, "sm_90a", SMS)
                assert (cut is not None) == want, (n, k, experts, segments)
                if cut is not None:
                    cases += 1
                    assert cut == dataclasses.replace(plain, tail_parts=2, tail_blocks=True)
                    assert _plan(n, k, 64, m // 64, config=cut).workspace_bytes == launch.workspace_bytes
                assert grouped.contiguous_tail_config(w, m, "sm_100a", SMS) is None
    assert cases >= 4
    # Session 56's measured cases: EP32 128 rows per expert, gate_up (192 items, 1.45 rounds) cut; its
    # down (336 items, a last round of 72) not; EP8 128's down (1344 items, 10.2 rounds) cut; EP8 256's (20.4) not.
    assert grouped.contiguous_tail_config(_weight(4096, 7168, 12), 128 * 12, "sm_90a", SMS) is not None
    assert grouped.contiguous_tail_config(_weight(7168, 2048, 12), 128 * 12, "sm_90a", SMS) is None
    assert grouped.contiguous_tail_config(_weight(7168, 2048, 48), 128 * 48, "sm_90a", SMS) is not None
    assert grouped.contiguous_tail_config(_weight(7168, 2048, 48), 128 * 96, "sm_90a", SMS) is None
    assert blocks_cut(block_rows_wide_configs(4096, 7168)[0]) is None  # the weight ring: no cut
    sources = {kk.source for kk in grouped.kernels("sm_90a")}
    for n, k in KIMI[:2]:
        cut = dataclasses.replace(blocks_cut(_plan(n, k, 64, 100).config), tma_rows=True)
        twins = (cut, *((dataclasses.replace(cut, silu_mul=True),) if (n, k) == KIMI[0] else ()))
        assert all(t.kernel().source in sources for c in twins for t in (c, dataclasses.replace(c, subnormal=True)))


def test_weights_with_small_scales_plan_the_one_fma_form() -> None:
    small = dataclasses.replace(_weight(4096, 7168), small_scales=True)
    for block_m in (8, 16, 24, 56, 64):
        plain = _plan(4096, 7168, block_m, 300)
        plan = indexed.plan(small, block_m=block_m, capacity=300, num_sms=SMS, arch="sm_90a")
        assert not plain.config.subnormal and plan.config == dataclasses.replace(plain.config, subnormal=True)
        assert (plan.grid, plan.smem, plan.list_cap, plan.workspace) == (plain.grid, plain.smem, plain.list_cap,
                                                                         plain.workspace)
        assert plan is indexed.plan(small, block_m=block_m, capacity=300, num_sms=SMS, arch="sm_90a")  # memoized
        # An explicit configuration gets the form too; asking for it on other weights is refused.
        assert indexed.plan(small, block_m=block_m, capacity=300, num_sms=SMS, arch="sm_90a",
                            config=plain.config).config == plan.config
        with pytest.raises(ChordInputError, match="exact only for scales below 2\\^-5"):
            _plan(4096, 7168, block_m, 300, config=plan.config)


def test_default_configs_cover_every_kimi_plan() -> None:
    configs = set(indexed.default_configs())
    assert len(configs) == len(indexed.default_configs())
    decode = set(indexed.default_configs("sm_100a"))
    assert len(decode) == 2 * 22 and not any(isinstance(c, indexed.WgmmaConfig) for c in decode)
    # Each with its one-fma twin, which weights whose scales are all below 2^-5 launch.
    assert all(dataclasses.replace(c, subnormal=not c.subnormal) in configs for c in configs)
    for n, k in KIMI:
        for capacity in (1, 62, 300, 2000, 9000):
            for block_m in indexed.BLOCK_MS:
                assert _plan(n, k, block_m, capacity, arch="sm_100a").config in decode
            for block_m in indexed.block_ms_for(_weight(n, k)):  # every tile choose_block_m picks
                cfg = _plan(n, k, block_m, capacity).config
                assert cfg in configs
                if (n, k) in ((4096, 7168), (512, 7168)) and isinstance(cfg, indexed.WgmmaConfig):
                    assert dataclasses.replace(cfg, silu_mul=True) in configs  # fused_moe's gate_up


KIMI_LAYERS = {"h200_ep8": (48, 384, 7168, 2048), "h200_tp8": (384, 384, 7168, 256)}
"""Kimi K2's MoE per rank: local experts, global experts, H, I (the EP8 and TP8 profiles)."""


def _kimi_layer(profile: str, small_scales: bool) -> tuple[chord_kernels.PackedWeight, chord_kernels.PackedWeight]:
    local, _, h, inter = KIMI_LAYERS[profile]
    return tuple(dataclasses.replace(_weight(n, k, local), profile=profile, small_scales=small_scales)
                 for n, k in ((2 * inter, h), (h, inter)))


@pytest.mark.parametrize("small_scales", [False, True])
@pytest.mark.parametrize("profile", sorted(KIMI_LAYERS))
def test_prepare_layer_loads_every_kernel_the_layer_launches(profile: str, small_scales: bool) -> None:
    """Whatever the batch, fused_moe / moe_experts launch only kernels prepare_layer loads, so that
    nothing compiles or loads at a first batch of a new size or during CUDA-graph capture: the down
    from rows in routing order (its tensor-copy twins) and the top-k sum included, which chord-vllm's
    prepare missed before session 50."""
    local, total, _, _ = KIMI_LAYERS[profile]
    w13, w2 = _kimi_layer(profile, small_scales)
    prepared = api.layer_kernels(w13, w2, "sm_90a")
    assert local_topk_sum_kernel() in prepared and silu_and_mul_kernel() in prepared
    orders = set()
    for tokens in sorted({*range(1, 40), *(round(1.13 ** i) for i in range(30, 84))}):  # 1 to ~28000
        slots = tokens * 8
        local_slots = math.ceil(slots * local / total)
        block_m = indexed.layer_block_m(w13, w2, local_slots)
        tok_e = slots / total
        for capacity in {1, local_slots // block_m + 1, local_slots // block_m + local}:  # how the routing spreads
            in_order = api.both_on_wgmma(w13, w2, block_m, capacity, SMS, "sm_90a", tok_e)
            gate_up = api.launch_plan(w13, block_m, capacity, SMS, "sm_90a", tok_e=tok_e, activation="silu")
            down = api.launch_plan(w2, block_m, capacity, SMS, "sm_90a", tok_e=tok_e, block_rows=in_order)
            for launched in (gate_up.config, down.config):
                assert launched.kernel() in prepared, (tokens, capacity, launched)
                assert launched.subnormal == small_scales
            assert down.config.tma_rows == in_order if isinstance(down.config, indexed.WgmmaConfig) else not in_order
            orders.add(in_order)
    assert orders == {False, True}  # both orders planned: decode and prefill batches


@pytest.mark.parametrize("small_scales", [False, True])
@pytest.mark.parametrize("profile", sorted(KIMI_LAYERS))
def test_prepare_layer_masked_loads_every_kernel_of_the_batched_layer(profile: str, small_scales: bool) -> None:
    """The same for a layer over DeepEP low-latency buffers (both GEMMs through gemm_masked, as
    chord-vllm's batched experts run them): prepare_layer(masked=True) loads what any expected rows
    per expert and buffer depth launch, and nothing of the routing or the top-k sum."""
    w13, w2 = _kimi_layer(profile, small_scales)
    prepared = api.layer_kernels(w13, w2, "sm_90a", masked=True)
    assert local_topk_sum_kernel() not in prepared and silu_and_mul_kernel() in prepared
    for max_m in (16, 128, 256, 2048):
        for expected_m in (1, 2, 3, 5, 8, 12, 16, 24, 32, 43, 64, 86, 100, 128, 150, 192, 256, 512):
            rows = max(1, min(expected_m, max_m))
            block_m = indexed.layer_block_m(w13, w2, rows * w13.num_experts)
            capacity = w13.num_experts * math.ceil(max_m / block_m)
            for launch in (api.launch_plan(w13, block_m, capacity, SMS, "sm_90a", tok_e=rows, activation="silu",
                                           block_rows=True),
                           api.launch_plan(w2, block_m, capacity, SMS, "sm_90a", tok_e=rows, block_rows=True)):
                assert launch.config.kernel() in prepared, (max_m, expected_m, launch.config)


def test_workspace_layout_and_views() -> None:
    layout = WorkspaceLayout(counters=2, flags=5, partials=8)
    c = COUNTER_BYTES
    assert (layout.zeroed_bytes, layout.partials_offset, layout.nbytes) == (28, c, c + 32)
    assert WorkspaceLayout().nbytes == 0 and WorkspaceLayout(counters=2).nbytes == 8
    ws = torch.zeros(c + 32, dtype=torch.uint8)
    base = ws.data_ptr()
    assert layout.bind(ws) == {"counters": base, "flags": base + 8, "partials": base + c}
    assert WorkspaceLayout(flags=3).bind(ws) == {"counters": None, "flags": base, "partials": None}
    assert WorkspaceLayout().bind(None) == {"counters": None, "flags": None, "partials": None}
    with pytest.raises(ChordInputError, match=f"at least {c + 32} bytes"):
        layout.bind(ws[:40])
    with pytest.raises(ChordInputError, match="counter region"):
        WorkspaceLayout(flags=c // 4 + 1)
    cpu = torch.device("cpu")
    with pytest.raises(ChordInputError, match="at least 100 bytes"):
        check_workspace(ws[:64], 100, cpu)
    with pytest.raises(ChordInputError, match="dtype torch.uint8"):
        check_workspace(ws.view(torch.int32), 16, cpu)
    with pytest.raises(ChordInputError, match="16-byte aligned"):
        check_workspace(ws[4:], 16, cpu)
    with pytest.raises(ChordInputError, match="nbytes: expected a non-negative integer"):
        new_workspace(-1)


def test_no_launch_puts_partials_where_another_keeps_counters() -> None:
    # One workspace serves launches of every configuration and grid (a default per stream, or one
    # vLLM micro-batch's): every launch's counters sit inside the shared counter region and every
    # launch's partials after it, whatever its grid (the grid shrinks with small routing tensors).
    for arch in ("sm_90a", "sm_100a"):
        for cfg in indexed.default_configs(arch):
            for grid in (1, 7, 132, 148 * cfg.ctas_per_sm):
                layout = cfg.workspace(grid)
                assert layout.zeroed_bytes <= COUNTER_BYTES
                assert not layout.partials or layout.partials_offset == COUNTER_BYTES


def test_arguments_are_one_field_list() -> None:
    fields = [f.name for f in ARGS.fields]
    source = prelude()
    positions = [source.index(f"  {f.member()}") for f in ARGS.fields]
    assert positions == sorted(positions)
    assert f"sizeof(chord::indexed::Args) == {ARGS.size}" in source and ARGS.size == 17 * 8 + 15 * 4 + 4
    entry = indexed.DecodeConfig(block_m=8).source()
    assert "const int32_t* __restrict__ tiles," in entry and "__nv_bfloat16* out," in entry
    # The tensor map travels as a parameter of its own; the struct holds its address.
    assert "const __grid_constant__ chord::TmaDescriptor a_rows," in entry
    assert "const chord::TmaDescriptor* a_rows;" in source and "struct alignas(64) TmaDescriptor" in source
    values = ["&a_rows" if f == "a_rows" else f for f in fields]
    assert "const chord::indexed::Args args{" + ", ".join(values) + "};" in entry


def test_argument_packing_checks_every_value() -> None:
    demo = ArgStruct("Demo", "chord::test", [Field("p", "const float*", restrict=True), Field("n", "int"),
                                            Field("x", "float"), Field("u", "uint32_t")])
    cpu = torch.device("cpu")
    t = torch.zeros(4)
    packed = demo.pack(cpu, p=t, n=-3, x=1.5, u=7)
    assert (packed.p, packed.n, packed.x, packed.u) == (t.data_ptr(), -3, 1.5, 7)
    assert demo.pack(cpu, p=None, n=0, x=0, u=0).p is None  # a null pointer
    assert demo.pack(cpu, p=0x1000, n=0, x=0, u=0).p == 0x1000  # an address the caller checked
    with pytest.raises(ChordInputError, match=r"missing fields \['u'\]"):
        demo.pack(cpu, p=t, n=1, x=0.0)
    with pytest.raises(ChordInputError, match=r"unknown fields \['m'\]"):
        demo.pack(cpu, p=t, n=1, x=0.0, u=0, m=2)
    with pytest.raises(ChordInputError, match="Demo.n: expected an integer"):
        demo.pack(cpu, p=t, n=1 << 31, x=0.0, u=0)
    with pytest.raises(ChordInputError, match="Demo.u: expected an integer"):
        demo.pack(cpu, p=t, n=1, x=0.0, u=-1)
    with pytest.raises(ChordInputError, match="Demo.p: expected a tensor on meta"):
        demo.pack(torch.device("meta"), p=t, n=1, x=0.0, u=0)
    with pytest.raises(ChordInputError, match="Demo.p: expected a tensor, an address or None"):
        demo.pack(cpu, p=1.5, n=1, x=0.0, u=0)
    with pytest.raises(ChordInputError, match="only pointers"):
        Field("n", "int", restrict=True)
    maps = ArgStruct("Maps", "chord::test", [Field("m", TMA_DESCRIPTOR), Field("n", "int")])
    assert maps.size == 16  # the device struct holds the descriptor's address
    blob = bytes(range(128))
    assert bytes(maps.pack(cpu, m=blob, n=1).m) == blob
    assert bytes(maps.pack(cpu, m=None, n=1).m) == bytes(128)  # zeros for a kernel that never reads it
    with pytest.raises(ChordInputError, match="Maps.m: expected the 128 bytes of a tensor map"):
        maps.pack(cpu, m=blob[:64], n=1)
    with pytest.raises(ChordInputError, match="unsupported C\\+\\+ type"):
        Field("h", "half")


def test_gpu_facts_live_once() -> None:
    assert hardware.SMEM_PER_SM == 228 * 1024
    from chord_kernels.indexed.layout import PROFILE_ARCHS, PROFILES

    assert PROFILES == tuple(PROFILE_ARCHS) and PROFILE_ARCHS["h200_ep8"] == ("sm_90a",)


def test_packed_weights_plan_like_their_shape() -> None:
    packed, scales = random_quantized(3, 40, 96)
    pw = dataclasses.replace(chord_kernels.pack("indexed", packed, scales, profile="h200_ep8"), small_scales=False)
    assert indexed.plan(pw, block_m=16, capacity=9, num_sms=SMS, arch="sm_90a") is _plan(40, 96, 16, 9)


def test_plan_refuses_an_unsupported_arch_and_no_sms():
    weight = chord_kernels.pack("indexed", *random_quantized(2, 64, 256), profile="h200_ep8")
    with pytest.raises(chord_kernels.ChordUnsupportedError, match="arch: expected one of .* got 'sm_80'"):
        indexed.plan(weight, block_m=16, capacity=8, num_sms=132, arch="sm_80")
    with pytest.raises(chord_kernels.ChordUnsupportedError, match="got 'sm_70'"):
        indexed.max_workspace_bytes([weight], num_sms=132, arch="sm_70")
    with pytest.raises(ChordInputError, match="num_sms: expected a positive integer, got 0"):
        indexed.plan(weight, block_m=16, capacity=8, num_sms=0, arch="sm_90a")


def test_moe_experts_checks_its_inputs_before_touching_cuda():
    # It once went straight to run_gemm, which asked torch.cuda for the device's architecture
    # (an AssertionError from torch on a CPU build) before any check.
    w13 = chord_kernels.pack("indexed", *random_quantized(2, 128, 256), profile="h200_ep8")
    w2 = chord_kernels.pack("indexed", *random_quantized(2, 256, 64), profile="h200_ep8")
    ids = torch.tensor([[0, 1], [1, 0]])
    r = chord_kernels.routing.align_block_size(ids, 16, 2)
    routing = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
    with pytest.raises(ChordInputError, match="hidden: expected a tensor on cuda, got one on cpu"):
        indexed.moe_experts(torch.randn(2, 256).bfloat16(), w13, w2, routing, torch.rand(2, 2), ids, block_m=16)


def test_wide_gate_up_items_run_in_cta_pairs() -> None:
    """From K = 4096 (the gate_up GEMMs) the wide items of the weight ring (16 x 10 under EP, 24 x 7) gathering
    their rows run in clusters of two CTAs (session 66); not the downs, the tensor-copy twins, the items on
    256-K stages, nor an odd number of N tiles. A paired launch is whole clusters and its kernel declares them."""
    wide = {wide16_config(4096, 7168): 4096, choose_wgmma_config(4096, 7168, 24, 140.0): 4096,
            choose_wgmma_config(512, 7168, 24, 145.0): 512}
    for cfg, n in wide.items():
        assert cfg.cta_pair and cfg.cluster == 2 and cfg.weight_ring and cfg.dynamic, cfg
        assert not api._tma_rows_twin(cfg).cta_pair
        assert "__cluster_dims__(2, 1, 1)" in cfg.source()
        for capacity in (1, 7, 500):
            launch = _plan(n, 7168, cfg.block_m, capacity, config=cfg)
            assert launch.grid % 2 == 0 and 2 <= launch.grid <= min(SMS, capacity * cfg.ntiles(n))
    assert silu_mul_twin(wide16_config(4096, 7168), 4096).cta_pair
    assert config_for_rows(4096, 7168, 16, "sm_90a", 128.0).cta_pair  # the EP8 plan at 121-136 rows per expert
    assert not wide16_config(7168, 2048).cta_pair  # the down: K = 2048
    assert not choose_wgmma_config(7168, 2048, 24, 145.0).cta_pair
    for block_m, tok_e in ((56, 43.0), (80, 64.0), (96, 170.0), (64, 341.0), (24, 14.0)):
        assert not choose_wgmma_config(4096, 7168, block_m, tok_e).cta_pair  # 256-K stages
    assert not choose_wgmma_config(1280, 7168, 24, 128.0).cta_pair  # five 256-row N tiles
    assert "__cluster_dims__" not in choose_wgmma_config(4096, 7168, 56, 43.0).source()
    with pytest.raises(ChordInputError, match="cta_pair: expected gathered rows"):
        WgmmaConfig(56, 2, 256, 3, tma_rows=True, cta_pair=True)
    with pytest.raises(ChordInputError, match="cta_pair: expected gathered rows"):
        WgmmaConfig(56, 2, 256, 3, tail_parts=8, cta_pair=True)


def test_two_stage_gate_up_items_prefetch_the_next_stage_rows() -> None:
    """From K = 4096 the gate_up items on two 256-K stages of 72 tokens or more ask L2 for the next stage's rows
    (sessions 67 and 68) where their rows come mostly from DRAM: one-block items (EP8 and TP8), and TP8's 64 x 2
    items (two N tiles); not EP8's 64 x 2 items (16 N tiles), the items on three stages, the 24 x 2 items on four
    consumer warpgroups, the wide items, the downs or the tensor-copy twins."""
    for n, block_m, tok_e in ((512, 72, 53.3), (4096, 72, 56.0), (512, 88, 66.7), (512, 104, 85.3), (512, 64, 100.0),
                              (512, 96, 170.7), (512, 64, 256.0), (4096, 80, 64.0), (4096, 96, 160.0),
                              (4096, 104, 185.0)):
        cfg = choose_wgmma_config(n, 7168, block_m, tok_e)
        assert cfg.prefetch_rows and cfg.stages == 2, (n, block_m, cfg)
        assert silu_mul_twin(cfg, n).prefetch_rows and not api._tma_rows_twin(cfg).prefetch_rows
        assert cfg.template_args().endswith(", 0, false, false, true")  # every argument, up to the last one set
        assert dataclasses.replace(cfg, prefetch_rows=False).kernel().source != cfg.kernel().source
    for n, k, block_m, tok_e in ((4096, 7168, 64, 100.0), (4096, 7168, 64, 341.0), (4096, 7168, 56, 43.0),
                                 (512, 7168, 32, 21.3), (4096, 7168, 24, 16.0), (512, 7168, 24, 16.0),
                                 (4096, 7168, 16, 128.0), (512, 7168, 24, 128.0), (7168, 2048, 80, 64.0),
                                 (7168, 256, 96, 170.7)):
        assert not choose_wgmma_config(n, k, block_m, tok_e).prefetch_rows, (n, k, block_m, tok_e)
    with pytest.raises(ChordInputError, match="prefetch_rows: expected gathered rows"):
        WgmmaConfig(96, 2, 256, 2, tma_rows=True, prefetch_rows=True)
