"""CPU tests of the indexed decode layout, its fragment algebra, and the dispatch heuristics."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import chord_kernels
from chord_kernels import formats, hardware
from chord_kernels.errors import ChordInputError, ChordLayoutError, ChordUnsupportedError
from chord_kernels.indexed import heuristics
from chord_kernels.indexed import layout as indexed_layout
from chord_kernels.indexed.layout import (
    ATOM_WORDS,
    PROFILES,
    atom_positions,
    tiles_have_small_scales,
)
from chord_kernels.indexed.wgmma import wide16_config
from chord_kernels.packed import PackedWeight, available_layouts


def _random(e: int, n: int, k: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return formats.random_quantized(e, n, k, generator=g)


@pytest.mark.parametrize(("e", "n", "k"), [(3, 40, 96), (1, 16, 32), (2, 7, 64), (4, 64, 256)])
@pytest.mark.parametrize("profile", PROFILES)
def test_pack_unpack_is_exact(e: int, n: int, k: int, profile: str) -> None:
    packed, scales = _random(e, n, k, seed=e * 1000 + n + k)
    pw = chord_kernels.pack("indexed", packed, scales, profile=profile)
    assert (pw.family, pw.mode, pw.profile, pw.layout_version) == ("indexed", "indexed", profile, 2)
    assert (pw.num_experts, pw.n, pw.k, pw.group_size) == (e, n, k, 32)
    tiles = pw.tensors["tiles"]
    assert tiles.dtype == torch.int32 and tiles.shape == (e, -(-n // 16) * (k // 32), ATOM_WORDS)
    p2, s2 = chord_kernels.unpack(pw)
    assert torch.equal(p2, packed) and torch.equal(s2, scales)


def test_bytes_per_weight_match_the_source() -> None:
    packed, scales = _random(2, 64, 128, seed=1)
    pw = chord_kernels.pack("indexed", packed, scales, profile="h200_ep8")
    source = packed.numel() * 4 + scales.numel() * 2
    assert pw.tensors["tiles"].numel() * 4 == source  # 0.5625 B/weight, no padding at N % 16 == 0


def test_single_expert_2d_input_and_state_dict_roundtrip() -> None:
    packed, scales = _random(1, 48, 64, seed=2)
    pw = chord_kernels.pack("indexed", packed[0], scales[0], profile="h200_tp8")
    again = PackedWeight.from_state_dict(pw.metadata(), pw.state_dict("w."), prefix="w.")
    p2, s2 = chord_kernels.unpack(again)
    assert torch.equal(p2, packed) and torch.equal(s2, scales)


def test_small_scales_are_recorded_from_the_scales_and_the_tiles(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(indexed_layout, "SCALE_READ_ATOMS", 7)  # the tiles' scales read in several pieces
    packed, scales = _random(2, 40, 96, seed=3)  # scales below 0.03
    pw = chord_kernels.pack("indexed", packed, scales, profile="h200_ep8")
    assert pw.small_scales and tiles_have_small_scales(pw.tensors["tiles"]) and "scales < 2^-5" in pw.describe()
    assert not any("small" in key for key in pw.metadata())  # a property of the values, not the layout
    assert PackedWeight.from_state_dict(pw.metadata(), pw.state_dict("w."), prefix="w.").small_scales  # read again
    limit = torch.tensor(2.0 ** -5, dtype=torch.bfloat16)
    below = torch.nextafter(limit, torch.tensor(0.0, dtype=torch.bfloat16))
    for value, small in ((below, True), (-below, True), (limit, False), (-limit, False),
                         (torch.tensor(float("nan")), False), (torch.tensor(float("inf")), False)):
        bad = scales.clone()
        bad[1, 39, 2] = value
        pw = chord_kernels.pack("indexed", packed, bad, profile="h200_ep8")
        assert pw.small_scales is small and tiles_have_small_scales(pw.tensors["tiles"]) is small
        assert PackedWeight.from_state_dict(pw.metadata(), pw.state_dict()).small_scales is small
        assert chord_kernels.pack("contiguous", packed, bad, profile="h200_ep8").small_scales is small
    meta = chord_kernels.pack("indexed", packed.to("meta"), scales.to("meta"), profile="h200_ep8")
    assert not meta.small_scales  # no values to check


@pytest.mark.parametrize(("n16", "kg"), [(1, 1), (5, 9), (8, 16), (7, 28), (3, 8)])
def test_atom_positions_are_a_permutation_with_contiguous_tiles(n16: int, kg: int) -> None:
    pos = atom_positions(n16, kg)
    assert torch.equal(pos.reshape(-1).sort().values, torch.arange(n16 * kg))
    # Every 64-channel block is one contiguous range, and within it every K tile too.
    for nt in range(0, n16, 4):
        for kt in range(0, kg, 8):
            block = pos[nt:nt + 4, kt:kt + 8].reshape(-1)
            assert block.max() - block.min() + 1 == block.numel()
        rows = pos[nt:nt + 4].reshape(-1)
        assert rows.max() - rows.min() + 1 == rows.numel()


@pytest.mark.parametrize(("n16", "kg", "atoms_n", "bkg"), [(7, 28, 4, 8), (9, 13, 8, 8), (5, 20, 4, 16), (12, 8, 8, 16)])
def test_kernel_addressing_matches_the_layout(n16: int, kg: int, atoms_n: int, bkg: int) -> None:
    """Mirror of decode.cuh: producer run offsets + consumer in-stage offsets == atom_positions."""
    pos = atom_positions(n16, kg)
    run_bytes = 4 * bkg  # atoms reserved per run in a stage
    for ntile in range(-(-n16 // atoms_n)):
        for kc in range(-(-kg // bkg)):
            nkg = min(bkg, kg - kc * bkg)
            for r_cta in range(min(atoms_n, n16 - ntile * atoms_n)):
                run, rr = divmod(r_cta, 4)
                run_row0 = ntile * atoms_n + run * 4
                run_rows = min(4, n16 - run_row0)
                src = run_row0 * kg + run_rows * kc * bkg  # producer: first atom of the run
                for kgl in range(nkg):
                    kt = kgl // 8
                    width = min(8, nkg - kt * 8)
                    local = run_rows * kt * 8 + rr * width + kgl % 8  # consumer
                    assert local < run_rows * nkg <= run_bytes
                    assert src + local == pos[ntile * atoms_n + r_cta, kc * bkg + kgl]


def test_layout_is_registered_and_errors_are_clear() -> None:
    assert "indexed" in available_layouts()
    packed, scales = _random(1, 16, 32, seed=3)
    with pytest.raises(ChordUnsupportedError, match="profile"):
        chord_kernels.pack("indexed", packed, scales, profile="a100_ep8")
    with pytest.raises(ChordInputError, match="options"):
        chord_kernels.pack("indexed", packed, scales, profile="h200_ep8", interleave=True)
    with pytest.raises(ChordInputError, match="dtype"):
        chord_kernels.pack("indexed", packed.float(), scales, profile="h200_ep8")
    ref = chord_kernels.pack("reference", packed, scales, profile="any")
    with pytest.raises(ChordLayoutError, match="family"):
        chord_kernels.indexed.check_weight(ref)


def _emulate_gemm(tiles: torch.Tensor, n: int, k: int, act: torch.Tensor) -> torch.Tensor:
    """What the kernel's warps compute for one expert, lane by lane, from the packed atoms.

    Follows docs/optimization.md: lane (g, t) dequantizes A-fragment pairs with
    ``(word >> s) & 0x000F000F``; both operands are in natural K order (the mma fragment's logical
    K is the column inside the group), as ldmatrix (decode) and the wgmma B tile read them.
    """
    n16, kg_count, _ = tiles.shape
    out = torch.zeros(n16 * 16, act.shape[0], dtype=torch.float64)
    words = tiles.to(torch.int64) & 0xFFFFFFFF
    bf = act.float().double()
    for nb in range(n16):
        for kg in range(kg_count):
            atom = words[nb, kg]
            scale_words = atom[64:]
            for ks in range(2):
                a_log = torch.zeros(16, 16, dtype=torch.float64)
                b_log = torch.zeros(16, act.shape[0], dtype=torch.float64)
                for lane in range(32):
                    g, t = lane // 4, lane % 4
                    wx, wy = int(atom[2 * lane]), int(atom[2 * lane + 1])
                    sw = int(scale_words[g])
                    s_lo = torch.tensor([sw & 0xFFFF], dtype=torch.int16).view(torch.bfloat16)
                    s_hi = torch.tensor([(sw >> 16) - (1 << 16) * ((sw >> 31) & 1)], dtype=torch.int16)
                    s_hi = s_hi.view(torch.bfloat16)

                    def pair(word: int, shift: int, s: torch.Tensor) -> list[float]:
                        lo, hi = (word >> shift) & 0xF, (word >> (shift + 16)) & 0xF
                        q = torch.tensor([lo - 8, hi - 8], dtype=torch.bfloat16)
                        return (q * s).double().tolist()  # one bf16 rounding, as mul.bf16x2

                    a_log[g, 2 * t:2 * t + 2] = torch.tensor(pair(wx, 8 * ks, s_lo), dtype=torch.float64)
                    a_log[g + 8, 2 * t:2 * t + 2] = torch.tensor(pair(wy, 8 * ks, s_hi), dtype=torch.float64)
                    a_log[g, 2 * t + 8:2 * t + 10] = torch.tensor(pair(wx, 8 * ks + 4, s_lo), dtype=torch.float64)
                    a_log[g + 8, 2 * t + 8:2 * t + 10] = torch.tensor(pair(wy, 8 * ks + 4, s_hi), dtype=torch.float64)
                    col = kg * 32 + 16 * ks + 2 * t
                    b_log[2 * t:2 * t + 2, :] = bf[:, col:col + 2].t()
                    b_log[2 * t + 8:2 * t + 10, :] = bf[:, col + 8:col + 10].t()
                out[nb * 16:(nb + 1) * 16] += a_log @ b_log
    return out[:n]


def test_fragment_algebra_reproduces_the_reference_gemm() -> None:
    n, k, tokens = 24, 320, 5
    packed, scales = _random(1, n, k, seed=4)
    pw = chord_kernels.pack("indexed", packed, scales, profile="h200_ep8")
    act = (torch.randn(tokens, k, generator=torch.Generator().manual_seed(5))).to(torch.bfloat16)
    n16, kg = -(-n // 16), k // 32
    atoms = pw.tensors["tiles"][0][atom_positions(n16, kg).reshape(-1)].reshape(n16, kg, ATOM_WORDS)
    got = _emulate_gemm(atoms, n, k, act)
    want = formats.dequantize(packed[0], scales[0]).double() @ act.double().t()
    # Same products, different summation order only (float64 here): agreement to rounding.
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_choose_block_m_follows_rows_per_expert() -> None:
    packed, scales = _random(48, 16, 32, seed=6)
    pw = chord_kernels.pack("indexed", packed, scales, profile="h200_ep8")
    choose = chord_kernels.indexed.choose_block_m
    assert choose(pw, 160) == 8       # ep8_decode, tok_e 3.3: the decode kernel
    assert choose(pw, 1) == 8
    assert choose(pw, 400) == 16      # tok_e 8.3: still the decode kernel
    # sm_90a profiles: the WGMMA kernel's tiles, 24 up to tok_e 16 (gate_up's items take an expert's
    # first two blocks), then tok_e + 1.9 sigma (at least 32) up to 64 rows ...
    assert choose(pw, 48 * 10) == 24  # tok_e 10
    assert choose(pw, 768) == 24      # ep8_tok16
    assert choose(pw, 48 * 16 + 1) == 32
    assert choose(pw, 1024) == 32     # tok_e 21 (tp8_1024)
    assert choose(pw, 2064) == 56     # ep8_tok43
    # where that tile is 64 (the prefill items' block), 56: 43.6 < tok_e <= 50.9
    assert choose(pw, 48 * 44) == 56
    assert choose(pw, 48 * 48) == 56
    assert choose(pw, 48 * 50) == 56
    assert choose(pw, 48 * 51) == 72
    assert choose(pw, 3072) == 80     # ep8_masked64
    # ... and on while that tile is at most 104 (one block per item; tok_e 86.6) ...
    assert choose(pw, 48 * 65) == 88
    assert choose(pw, 48 * 72) == 96
    assert choose(pw, 48 * 86) == 104
    # ... then 64-row blocks, two per WGMMA work item, up to tok_e 120 ...
    assert choose(pw, 48 * 87) == 64
    assert choose(pw, 48 * 96) == 64
    assert choose(pw, 48 * 120) == 64
    # ... 16-row blocks, up to ten per work item, above 120 and up to 136 (fewer than 256 experts),
    # 24-row blocks, up to seven per work item, up to 155 ...
    assert choose(pw, 48 * 121) == 16
    assert choose(pw, 6144) == 16     # ep8_tok128
    assert choose(pw, 48 * 136) == 16
    assert choose(pw, 48 * 136 + 1) == 24
    assert choose(pw, 48 * 150) == 24
    assert choose(pw, 48 * 155) == 24
    # ... 96-row blocks, one per work item, above 155 and up to 176 ...
    assert choose(pw, 48 * 155 + 1) == 96
    assert choose(pw, 8208) == 96     # tok_e 171
    assert choose(pw, 48 * 176) == 96
    assert choose(pw, 48 * 176 + 1) == 104  # ... 104 up to 192 ...
    assert choose(pw, 48 * 192) == 104
    # ... and 64-row blocks again beyond.
    assert choose(pw, 48 * 192 + 1) == 64
    assert choose(pw, 16368) == 64    # ep8_tok341
    tp8 = chord_kernels.pack("indexed", *_random(384, 16, 32, seed=8), profile="h200_tp8")
    assert choose(tp8, 816 * 8) == 24  # tok_e 17: 24-token blocks to 17 rows with many experts ...
    assert choose(tp8, 817 * 8) == 32
    assert choose(tp8, 1024 * 8) == 32  # tp8_1024
    assert choose(tp8, 1152 * 8) == 32  # tok_e 24: 32 to 24 rows with many experts ...
    assert choose(tp8, 1153 * 8) == 40
    assert choose(pw, 48 * 24) == 40   # ... tok_e + 1.9 sigma with EP8's 48
    assert choose(tp8, 2304 * 8) == 56  # tok_e 48
    assert choose(pw, 48 * 17) == 32   # ... to 16 with EP8's 48
    assert choose(tp8, 8192 * 8) == 96  # tp8_8192, tok_e 171
    assert choose(tp8, 9216 * 8) == 104  # tok_e 192
    assert choose(tp8, 9600 * 8) == 64  # tok_e 200
    assert choose(tp8, 4096 * 8) == 104  # tok_e 85
    assert choose(tp8, 4464 * 8) == 104  # tok_e 93: 104 beyond the tile's 86.6 with many experts ...
    assert choose(tp8, 4465 * 8) == 64
    assert choose(pw, 48 * 88) == 64  # ... not with EP8's 48
    assert choose(tp8, 4608 * 8) == 64  # tok_e 96
    assert choose(tp8, 6144 * 8) == 24  # tok_e 128: the 24-row wide items with many experts ...
    assert choose(tp8, 6960 * 8) == 24  # ... to tok_e 145, then 88-row blocks, one per item, to 160 ...
    assert choose(tp8, 6961 * 8) == 88
    assert choose(tp8, 7200 * 8) == 88
    assert choose(tp8, 7680 * 8) == 88
    assert choose(tp8, 7681 * 8) == 96  # ... and 96 as with EP8's 48 (which keep the wide items to 155)
    assert choose(pw, 48 * 146) == 24
    # Blackwell profiles keep the decode kernel's blocks.
    bw = chord_kernels.pack("indexed", packed, scales, profile="b200_ep8")
    assert choose(bw, 768) == 24
    assert choose(bw, 8192) == 32
    wide_bw = chord_kernels.pack("indexed", *_random(48, 16, 1024, seed=7), profile="b200_ep8")
    assert choose(wide_bw, 2064) == 64
    with pytest.raises(ChordInputError):
        choose(pw, -1)


def test_wgmma_configs_fit_shared_memory_without_spilling_tiles() -> None:
    from chord_kernels.indexed.heuristics import choose_config
    from chord_kernels.indexed.planner import (
        cached_plan,
        config_for_rows,
        configs_for,
        silu_mul_twin,
    )
    from chord_kernels.indexed.wgmma import (
        FOUR_CONSUMER_MAX_TOKENS,
        FOUR_CONSUMER_MIN_K,
        FOUR_CONSUMER_REGS,
        GROUP_PAIR_MIN_K,
        PREFILL_ROW_WIDTHS,
        ROW_WIDTHS_MIN_K,
        RUN_FOUR_CONSUMER_PAIR_REGS,
        RUN_FOUR_CONSUMER_REGS,
        RUN_FOUR_CONSUMER_TILES,
        RUN_FOUR_CONSUMER_TOKENS,
        RUN_MAX_K,
        RUN_TILES,
        SMEM_LIMIT,
        THREE_CONSUMER_REGS,
        WIDE_CONSUMER_REGS,
        WIDE_SEVEN_WIDTHS,
        WIDE_SHORT_K,
        WIDE_SHORT_K_WIDTHS,
        WgmmaConfig,
        choose_wgmma_config,
    )

    for bm in range(8, 264, 8):
        for n, k in [(4096, 7168), (7168, 2048), (512, 7168), (7168, 256), (40, 96)]:
            cfg = choose_wgmma_config(n, k, bm)
            assert cfg.block_m == bm and cfg.stages >= 2
            assert cfg.mt * cfg.tile <= 352  # accumulator registers
            wide = 7 if k > WIDE_SHORT_K else 6
            assert cfg.items == {heuristics.PREFILL_BLOCK: 2, heuristics.WIDE_BLOCK: wide}.get(bm, 1)
            if bm == heuristics.WIDE_BLOCK:
                assert cfg.widths == (WIDE_SHORT_K_WIDTHS if k <= WIDE_SHORT_K else WIDE_SEVEN_WIDTHS)
                assert cfg.consumer_regs == (216 if k <= WIDE_SHORT_K else WIDE_CONSUMER_REGS)
            else:
                # gate_up's one-block items of 24-48 tokens: four consumer warpgroups; the down's
                # (K = 2048, N = 7168) of 32 tokens: three; TP8's down (K = 256) in runs of N tiles at
                # 40-104-token blocks and on the 64 x 2 items: four of one tile each.
                four = (k >= FOUR_CONSUMER_MIN_K and n >= 512 and cfg.items == 1 and cfg.mt == 2
                        and 24 <= bm <= FOUR_CONSUMER_MAX_TOKENS)
                three = (n, k) == (7168, 2048) and bm == 32
                pairs = cfg.items == 2
                four_runs = k <= RUN_MAX_K and n > 128 and (
                    pairs or RUN_FOUR_CONSUMER_TOKENS[0] <= bm <= RUN_FOUR_CONSUMER_TOKENS[1])
                assert cfg.consumers == (4 if four or four_runs else 3 if three else 2), cfg
                regs = (FOUR_CONSUMER_REGS if four else THREE_CONSUMER_REGS if three
                        else (RUN_FOUR_CONSUMER_PAIR_REGS if pairs else RUN_FOUR_CONSUMER_REGS) if four_runs else 216)
                assert cfg.widths == () and cfg.consumer_regs == regs
                assert not four or (cfg.stages, cfg.bk, cfg.block_n, cfg.threads) == (2, 256, 512, 640)
                # The four-warpgroup runs: four N tiles each, from the global counter (session 73).
                assert not four_runs or (cfg.mt, cfg.block_n, cfg.pingpong, cfg.n_run, cfg.dynamic) == (
                    1, 256, False, RUN_FOUR_CONSUMER_TILES, True)
            # Narrower token counts (docs/optimization.md, sessions 17, 37 and 38).
            if k >= GROUP_PAIR_MIN_K and cfg.mt == 2 and bm == heuristics.PREFILL_BLOCK:  # per K group (session 61)
                assert cfg.row_widths == () and cfg.whole_stages and not cfg.commit_per_step
            elif k > ROW_WIDTHS_MIN_K and cfg.mt == 2 and bm == heuristics.PREFILL_BLOCK:
                assert cfg.row_widths == PREFILL_ROW_WIDTHS
            elif cfg.n_run and cfg.consumers == 4 and cfg.items == 1 and bm < 72:  # runs: one count, the two-tile rule
                assert cfg.row_widths == (bm - 8,) and cfg.commit_per_step, cfg
            elif cfg.mt == 2 and cfg.items == 1 and 32 <= bm < 72:  # one-block items
                assert cfg.row_widths == ((bm - 8,) if bm <= 40 or k <= RUN_MAX_K else (bm - 16, bm - 8)), cfg
                assert not cfg.commit_per_step and cfg.consumers in (2, 3)
                assert bool(cfg.n_run) == (k <= RUN_MAX_K)  # below 40 tokens runs keep two warpgroups
            elif (cfg.mt == 2 or cfg.consumers == 4) and cfg.items == 1 and bm >= 72:  # runs: from 80 one count
                assert cfg.row_widths == ((bm - 8,) if cfg.n_run and bm >= 80 else (bm - 16, bm - 8))
            else:
                assert cfg.row_widths == (), cfg
            assert cfg.smem_bytes(0) + 4 * 768 <= SMEM_LIMIT  # room to list two work items per TP8 expert
            assert cfg.dynamic == (k >= heuristics.DYNAMIC_MIN_K or (cfg.n_run > 0 and cfg.consumers == 4))
            assert cfg.workspace(132).counters == (2 if cfg.dynamic else 0)
    with pytest.raises(ChordInputError):
        WgmmaConfig(block_m=12)
    # Four consumer warpgroups: 640 threads get 96 registers each at launch, and the consumers'
    # share must leave the producer 24.
    four = choose_wgmma_config(4096, 7168, heuristics.WIDE_BLOCK, 12.0)
    uncut = dataclasses.replace(four, tail_parts=0)  # (the planned split tail appends its parts)
    assert four.register_pool == 96 and uncut.template_args().endswith(", 2, 4, false, false, false, true, false, 0u, 104")
    assert four.topk_sum_twin(4096) is None  # the sum's registers do not fit its share
    with pytest.raises(ChordInputError, match="consumer_regs"):
        dataclasses.replace(four, consumer_regs=136)  # 136 x 512 > 96 x 640 - 24 x 128
    with pytest.raises(ChordInputError, match="invalid wgmma config"):
        dataclasses.replace(four, consumers=5, consumer_regs=64)
    # Three, for the down GEMMs' one-block items of 24 and 32 tokens (384-channel N tiles, per-group
    # commits, whole stages): 512 threads get 128 registers each, shared evenly.
    for bm, tok_e, stages in ((24, 12.0, 3), (32, 20.0, 2)):
        three = choose_wgmma_config(7168, 2048, bm, tok_e)
        assert (three.consumers, three.consumer_regs, three.register_pool, three.stages) == (3, 128, 128, stages)
        assert (three.block_n, three.ntiles(7168), three.commit_per_step, three.whole_stages) == (384, 19, False, True)
        assert three.topk_sum_twin(7168) is not None
    assert choose_wgmma_config(7168, 2048, 48).consumers == 2  # 48 tokens: two (three measured slower)
    assert choose_wgmma_config(4096, 2048, 24, 12.0).consumers == 2  # narrower N: not measured
    assert choose_wgmma_config(7168, 2048, 24).items == 6  # rows unknown: the wide items
    assert choose_wgmma_config(4096, 7168, 16).consumers == 2  # 16-token blocks keep two
    # Beyond 40 tokens two stages fit with the epilogue in 16-token passes.
    wide_four = WgmmaConfig(block_m=48, mt=2, bk=256, stages=2, consumers=4, dynamic=True, consumer_regs=104)
    assert wide_four.smem_bytes(0) + 4096 <= SMEM_LIMIT
    assert wide_four.smem_bytes(0) < dataclasses.replace(wide_four, block_m=40).smem_bytes(0)  # 16-token passes
    # The one-block items of 32-56 tokens plan two, with whole stages (session 32: 1-3 % faster at 32).
    for bm in (32, 40, 48, 56):
        two = choose_wgmma_config(4096, 7168, bm)
        assert (two.consumers, two.whole_stages, two.commit_per_step) == (2, True, False)
    assert choose_wgmma_config(256, 7168, 32).consumers == 2  # N = 256 would leave two warpgroups idle
    # At 24-token blocks an item takes an expert's first two blocks (the K loop at 24 and 48 tokens).
    narrow = choose_wgmma_config(4096, 7168, heuristics.WIDE_BLOCK, 12.0)
    assert (narrow.consumers, narrow.items, narrow.tile, narrow.stages, narrow.widths) == (4, 2, 48, 2, ())
    assert narrow.smem_bytes(0) + 4096 <= SMEM_LIMIT
    assert choose_wgmma_config(512, 7168, heuristics.WIDE_BLOCK, 16.0).items == 2  # TP8's gate_up
    assert choose_wgmma_config(7168, 2048, heuristics.WIDE_BLOCK, 16.0).items == 1  # the down keeps one
    with pytest.raises(ChordInputError):
        WgmmaConfig(block_m=64, bk=256, weight_ring=True)  # the ring holds 256-K tiles under 128-K stages
    ring = WgmmaConfig(block_m=24, mt=2, bk=128, stages=3, items=7, weight_ring=True)
    assert ring.smem_bytes(0) <= SMEM_LIMIT and ring.stage_bytes == 43008  # activations only
    with pytest.raises(ChordInputError, match="silu_mul"):
        WgmmaConfig(block_m=64, mt=1, silu_mul=True)  # the gate and up tiles of a warpgroup
    fused = WgmmaConfig(block_m=24, mt=2, bk=128, stages=3, items=7, weight_ring=True, silu_mul=True)
    assert fused.template_args().endswith(", true, true, false, false, false, 0u") and fused.fits_silu_mul(4096)
    assert not fused.fits_silu_mul(264) and fused.ntiles(4096) == ring.ntiles(4096)
    assert WgmmaConfig(block_m=48, mt=2, silu_mul=True).template_args().endswith(", false, true, false, false, false, 0u")
    # The top-k-sum twin: the same tiles plus each row's local-slot mask per stage and per epilogue.
    summed = ring.topk_sum_twin(7168)
    assert summed == WgmmaConfig(block_m=24, mt=2, bk=128, stages=3, items=7, weight_ring=True, topk_sum=True)
    assert summed.template_args().endswith(", true, false, true, false, false, 0u")
    rows = WgmmaConfig(block_m=64, mt=2, items=2, stages=2, tma_rows=True)  # the grouped modes' loads
    assert rows.template_args().endswith(", false, false, false, false, true, 0u")
    assert rows.smem_bytes(0) == dataclasses.replace(rows, tma_rows=False).smem_bytes(0)
    with pytest.raises(ChordInputError, match="tma_rows"):
        WgmmaConfig(block_m=8, bk=256, items=9, tma_rows=True)  # 36 tensor copies per stage
    assert summed.smem_bytes(0) == ring.smem_bytes(0) + 3 * 4 * 168 + 2 * 4 * 168
    assert ring.topk_sum_twin(7164) is None and fused.topk_sum_twin(7168) is None
    for bm in (32, 40, 48, 56, 64):
        assert choose_wgmma_config(7168, 2048, bm).topk_sum_twin(7168) is not None
    with pytest.raises(ChordInputError, match="topk_sum"):
        WgmmaConfig(block_m=48, mt=2, silu_mul=True, topk_sum=True)
    with pytest.raises(ChordInputError):
        WgmmaConfig(block_m=256, mt=2)
    with pytest.raises(ChordInputError):
        WgmmaConfig(block_m=64, mt=2, items=3)  # 192 tokens x two tiles of accumulators
    # Items compiled at some widths: a mask of block counts, the widest always among them.
    narrow = choose_wgmma_config(7168, 2048, heuristics.WIDE_BLOCK)
    assert narrow.compiled_widths == (1, 3, 5, 6) and narrow.template_args().endswith(", 53u")
    # TP8's down (K <= 256): the weights evict-normal, the output streamed; the last template argument.
    assert choose_wgmma_config(7168, 256, 96).stream_out and choose_wgmma_config(7168, 256, 96).template_args().endswith(
        ", false, true")
    assert not any(choose_wgmma_config(n, k, 56).stream_out for n, k in ((7168, 2048), (4096, 7168), (512, 7168)))
    assert narrow.topk_sum_twin(7168) is None  # its accumulators leave the sum no registers
    assert ring.compiled_widths == tuple(range(1, 8))
    for widths in ((3, 1, 6), (1, 5), (0, 6), (6, 6)):
        with pytest.raises(ChordInputError, match="widths"):
            WgmmaConfig(block_m=24, mt=2, bk=128, stages=3, items=6, weight_ring=True, widths=widths)
    # Registers moved from the producer to the consumers: a template argument only when not the default.
    seven = choose_wgmma_config(4096, 7168, heuristics.WIDE_BLOCK)
    assert seven.compiled_widths == (6, 7) and seven.cta_pair  # gate_up: in CTA pairs, every argument spelled
    assert seven.template_args().endswith(", 96u, 224, 0u, 0, false, false, false, false, 0, false, true")
    assert dataclasses.replace(seven, cta_pair=False).template_args().endswith(", 96u, 224")
    # The down GEMMs take seven-block items from WIDE_SEVEN_MIN_TOK_E rows per expert, and 24-token
    # blocks up to WIDE_MIN_TOK_E rows are one block per item on 256-K stages (gate_up's two; the plan's
    # configs_for lists all three, so prepare() loads them); nothing else depends on tok_e.
    down_six, down_seven = (choose_wgmma_config(7168, 2048, heuristics.WIDE_BLOCK, tok_e) for tok_e in (134.0, 134.5))
    assert down_six.items == 6
    assert down_six == choose_wgmma_config(7168, 2048, heuristics.WIDE_BLOCK)
    assert (down_seven.items, down_seven.widths, down_seven.consumer_regs) == (7, (6, 7), 224)
    one = choose_wgmma_config(7168, 2048, heuristics.WIDE_BLOCK, 16.0)
    assert one == choose_wgmma_config(7168, 2048, heuristics.WIDE_BLOCK, heuristics.WIDE_MIN_TOK_E)
    assert (one.items, one.bk, one.mt, one.weight_ring, one.row_widths) == (1, 256, 2, False, ())
    assert choose_wgmma_config(7168, 2048, heuristics.WIDE_BLOCK, 120.5) == down_six
    assert configs_for(7168, 2048, heuristics.WIDE_BLOCK, "sm_90a") == (down_six, one, down_seven)
    assert config_for_rows(7168, 2048, heuristics.WIDE_BLOCK, "sm_90a", 150.0) == down_seven
    assert config_for_rows(7168, 2048, heuristics.WIDE_BLOCK, "sm_90a", 128.0) is None
    assert config_for_rows(4096, 7168, heuristics.WIDE_BLOCK, "sm_90a", 12.0).items == 2
    # 16-token blocks beyond 120 rows per expert: the wide items of up to ten blocks, rows gathered.
    wide16 = config_for_rows(4096, 7168, heuristics.WIDE16_BLOCK, "sm_90a", 128.0)
    assert wide16 == wide16_config(4096, 7168) and wide16 in configs_for(4096, 7168, 16, "sm_90a")
    assert (wide16.items, wide16.widths, wide16.weight_ring, wide16.tma_rows) == (10, (8, 9, 10), True, False)
    assert config_for_rows(7168, 2048, 16, "sm_90a", 130.0) == wide16_config(7168, 2048)
    assert config_for_rows(4096, 7168, 16, "sm_90a", heuristics.WIDE_MIN_TOK_E) is None
    assert config_for_rows(4096, 7168, 16, "sm_100a", 128.0) is None
    # Below K = 2048 (TP8's down) the one-block 24-token items are the decode kernel's.
    decode24 = heuristics.short_k_config(7168, heuristics.WIDE_BLOCK)
    assert (decode24.block_n, decode24.ctas_per_sm, decode24.schedule) == (256, 2, "strided")
    assert config_for_rows(7168, 256, heuristics.WIDE_BLOCK, "sm_90a", 10.7) == decode24
    assert decode24 in configs_for(7168, 256, heuristics.WIDE_BLOCK, "sm_90a")
    assert config_for_rows(7168, 256, heuristics.WIDE_BLOCK, "sm_90a", 128.0) is None  # the wide items
    assert config_for_rows(4096, 7168, heuristics.WIDE_BLOCK, "sm_90a", 150.0) is None  # seven blocks already
    assert config_for_rows(7168, 2048, 32, "sm_90a", 150.0) is None
    # The 32-token blocks up to K = 256 (TP8's down) are the WGMMA kernel's runs of N tiles on four
    # consumer warpgroups of one tile, whatever N; from there to K = 2048 the decode kernel's
    # (512-channel tiles, one CTA per SM, items from a counter), without tok_e; narrow N
    # choose_config's tiles.
    runs32 = choose_wgmma_config(7168, 256, 32)
    assert (runs32.consumers, runs32.mt, runs32.n_run, runs32.stream_out, runs32.dynamic) == (4, 1, 4, True, True)
    assert configs_for(7168, 256, 32, "sm_90a") == (runs32,)
    assert cached_plan(7168, 256, 32, 4000, 132, "sm_90a", None).config == runs32
    assert cached_plan(264, 256, 32, 40, 132, "sm_90a", None).config == choose_wgmma_config(264, 256, 32)
    decode32 = heuristics.short_k_config(7168, 32)
    assert (decode32.block_n, decode32.ctas_per_sm, decode32.schedule) == (512, 1, "dynamic")
    assert configs_for(7168, 1024, 32, "sm_90a") == (decode32,)
    assert cached_plan(7168, 1024, 32, 4000, 132, "sm_90a", None).config == decode32
    assert cached_plan(264, 1024, 32, 40, 132, "sm_90a", None).config == choose_config(264, 1024, 32)
    # And the decode kernel's own 16-token blocks there take the 24-token blocks' tiles, with row
    # widths (those of 24 and 32 tokens without).
    decode16 = heuristics.short_k_config(7168, 16)
    assert decode16.row_widths and not decode24.row_widths and not decode32.row_widths
    assert dataclasses.replace(decode16, block_m=24, row_widths=False) == decode24
    # (and beyond 120 rows per expert, where 16-token blocks are the wide items of ten)
    assert configs_for(7168, 256, 16, "sm_90a") == (decode16, wide16_config(7168, 256))
    assert cached_plan(7168, 256, 16, 4000, 132, "sm_90a", None).config == decode16
    assert decode16 not in configs_for(7168, 256, 16, "sm_100a")  # Blackwell keeps choose_config's
    assert heuristics.short_k_config(2048, 16) is None and heuristics.short_k_config(7168, 8) is None
    for cfg in (decode16, decode24, decode32):
        assert cfg.smem_bytes(0) <= cfg.per_cta_budget()
    assert config_for_rows(7168, 256, 32, "sm_90a", 21.3) is None
    assert isinstance(configs_for(7168, 2048, 32, "sm_90a")[0], WgmmaConfig)
    # Row widths: token counts between the compiled block counts, a mask of 8-token steps after the
    # consumer registers (then always written).
    prefill = choose_wgmma_config(7168, 2048, heuristics.PREFILL_BLOCK)
    assert prefill.row_widths == PREFILL_ROW_WIDTHS and prefill.wgmma_widths == (64, 96, 112, 128)
    assert prefill.template_args().endswith(", 0u, 216, 10240u")  # bits 11 and 13: 96 and 112 tokens
    assert prefill.topk_sum_twin(7168).row_widths == ()  # the 64 x 2 items spill next to the sum
    b80 = choose_wgmma_config(4096, 7168, 80)
    assert b80.wgmma_widths == (64, 72, 80) and b80.topk_sum_twin(7168).row_widths == (64, 72)
    # From K = 4096 the 64 x 2 items, and up to K = 2048 the one-block items to 96 tokens, commit per K group
    # on whole stages (the pairs then without row widths; session 61); their top-k-sum twins per K step.
    pair, down80 = choose_wgmma_config(4096, 7168, heuristics.PREFILL_BLOCK), choose_wgmma_config(7168, 2048, 80)
    assert pair.row_widths == () and pair.wgmma_widths == (64, 128) and down80.row_widths == (64, 72)
    for group in (pair, down80):
        assert group.whole_stages and not group.commit_per_step and not group.shift_pairs
        assert group.topk_sum_twin(7168).commit_per_step and not group.topk_sum_twin(7168).whole_stages
    assert choose_wgmma_config(7168, 2048, 104).commit_per_step  # plain 104-token items spill per K group
    # From K = 4096 the 96- and 104-token items too, with the pairs shifted (session 63); 88 stays per step.
    for bm in (96, 104):
        gate_up = choose_wgmma_config(4096, 7168, bm)
        assert gate_up.whole_stages and not gate_up.commit_per_step and gate_up.shift_pairs and gate_up.row_widths
    assert choose_wgmma_config(4096, 7168, 88).commit_per_step
    assert choose_wgmma_config(7168, 256, heuristics.PREFILL_BLOCK).row_widths == ()  # K = 256
    # Whole K stages (no K bound in the loop) where K is a multiple of the stage and the loop commits
    # per K group (runs of N tiles among them): not the per-step loops (row widths, 64 x 2 items, four
    # warpgroups).
    b56 = choose_wgmma_config(4096, 7168, 56)
    assert b56.whole_stages and not b56.commit_per_step and b56.wgmma_widths == (40, 48, 56)
    assert b56.template_args().endswith(", 0u, 216, 48u, 0, false, true")  # bits 5 and 6: 40 and 48 tokens
    assert choose_wgmma_config(7168, 2048, 24, 16.0).whole_stages
    assert not choose_wgmma_config(7168, 2080, 56).whole_stages  # a short last stage
    for per_step in (prefill, b80, choose_wgmma_config(4096, 7168, 24, 16.0)):
        assert per_step.commit_per_step and not per_step.whole_stages
    assert not choose_wgmma_config(7168, 256, 56).whole_stages and choose_wgmma_config(7168, 256, 56).n_run
    # The one-fma form reads the nibble pairs at bit 4 in place except on the one-block items with row
    # widths whose K loop commits per K step (not runs), which shift every pair first
    # (docs/optimization.md, session 32).
    runs72 = choose_wgmma_config(7168, 256, 72)
    assert b80.shift_pairs and choose_wgmma_config(4096, 7168, 96).shift_pairs
    assert not any(c.shift_pairs for c in (prefill, b56, runs72, choose_wgmma_config(4096, 7168, 24, 16.0)))
    assert dataclasses.replace(b80, subnormal=True).template_args().endswith(  # (prefetch_rows: every argument)
        ", 384u, 0, false, false, true, true, 0, false, false, true")
    assert dataclasses.replace(b56, subnormal=True).template_args().endswith(", 48u, 0, false, true, true")
    assert dataclasses.replace(b56, shift_pairs=True).source() == b56.source()  # no form to choose
    assert choose_wgmma_config(7168, 256, 72).row_widths == (56, 64)
    assert choose_wgmma_config(7168, 2048, 56).row_widths == (40, 48)  # per-K-group commits (session 37)
    assert choose_wgmma_config(512, 7168, 32).row_widths == (24,)
    assert choose_wgmma_config(7168, 2048, 24, 16.0).row_widths == ()  # 24 tokens: no narrower wgmma is cheaper
    runs56 = choose_wgmma_config(7168, 256, 56)  # runs of N tiles: one count (session 38), four warpgroups
    assert (runs56.n_run, runs56.row_widths, runs56.consumer_regs) == (RUN_FOUR_CONSUMER_TILES, (48,), RUN_FOUR_CONSUMER_REGS)
    assert (runs56.consumers, runs56.mt, runs56.pingpong, runs56.stages) == (4, 1, False, 5)
    assert runs56.topk_sum_twin(7168) is None  # four warpgroups leave the sum no registers
    assert silu_mul_twin(runs56, 7168) is None  # no warpgroup holds gate and up: two steps
    for bad in ((72, 64), (64,), (8, 8), (12,), (128,), (136,)):
        with pytest.raises(ChordInputError, match="row_widths"):
            WgmmaConfig(block_m=64, mt=2, items=2, stages=2, row_widths=bad)
    assert WgmmaConfig(block_m=80, mt=2, stages=2, row_widths=(8, 72)).wgmma_widths == (8, 72, 80)
    assert configs_for(7168, 2048, 32, "sm_90a") == (choose_wgmma_config(7168, 2048, 32),)
    for regs in (220, 56, 248):
        with pytest.raises(ChordInputError, match="consumer_regs"):
            WgmmaConfig(block_m=24, mt=2, bk=128, stages=3, items=7, weight_ring=True, consumer_regs=regs)
    # Runs of N tiles over a resident activation tile: the 256-K configurations up to K = 256 (TP8's
    # down), not beyond; on the 64 x 2 items four warpgroups of one tile (no top-k-sum twin), the
    # consumers of two-tile warpgroups in turns: the template's two last arguments.
    pairs = choose_wgmma_config(7168, 256, heuristics.PREFILL_BLOCK)
    assert (pairs.n_run, pairs.consumers, pairs.mt, pairs.pingpong, pairs.stages) == (RUN_FOUR_CONSUMER_TILES, 4, 1, False, 3)
    assert (pairs.items, pairs.consumer_regs, pairs.topk_sum_twin(7168)) == (2, RUN_FOUR_CONSUMER_PAIR_REGS, None)
    runs = WgmmaConfig(block_m=heuristics.PREFILL_BLOCK, mt=2, stages=3, items=2, n_run=RUN_TILES, pingpong=True)
    assert runs.template_args().endswith(f", 0u, 216, 0u, {RUN_TILES}, true")
    assert runs.resident_bytes == 4 * 128 * 128 and runs.stage_bytes == 16 * 8 * 288
    assert choose_wgmma_config(7168, 256, 72).n_run == RUN_FOUR_CONSUMER_TILES
    assert choose_wgmma_config(7168, 256, 16).n_run == RUN_TILES  # the two warpgroups in turns
    assert choose_wgmma_config(7168, 256, 80).row_widths == (72,)  # two counts spill with runs
    twin = runs.topk_sum_twin(7168)  # the sum's registers spill next to runs: items of one N tile
    assert (twin.n_run, twin.pingpong, twin.topk_sum) == (0, False, True)
    with pytest.raises(ChordInputError, match="topk_sum"):
        WgmmaConfig(block_m=64, mt=2, stages=2, topk_sum=True, n_run=2)
    assert choose_wgmma_config(7168, 2048, heuristics.PREFILL_BLOCK).n_run == 0
    assert choose_wgmma_config(7168, 256, heuristics.WIDE_BLOCK).n_run == 0  # the weight ring's 128-K stages
    for bad in ({"n_run": 2, "bk": 128}, {"n_run": -1}, {"pingpong": True},
                {"n_run": 2, "pingpong": True, "consumers": 1}):
        with pytest.raises(ChordInputError, match="n_run|pingpong"):
            WgmmaConfig(block_m=64, mt=2, stages=2, **bad)


@pytest.mark.parametrize("block_m", heuristics.BLOCK_MS)
@pytest.mark.parametrize(("n", "k"), [(4096, 7168), (7168, 2048), (512, 7168), (7168, 256), (40, 96)])
def test_default_configs_fit_shared_memory(block_m: int, n: int, k: int) -> None:
    cfg = heuristics.choose_config(n, k, block_m)
    assert cfg.block_m == block_m
    assert cfg.stages >= 2
    # Room for the compacted block list of a decode batch (Kimi TP8 decode160: 496 blocks).
    assert cfg.smem_bytes(512) <= cfg.per_cta_budget()
    assert cfg.ctas_per_sm * (cfg.smem_bytes(512) + hardware.SMEM_RESERVED_PER_CTA) <= hardware.SMEM_PER_SM


@pytest.mark.parametrize(("n", "k", "slots", "experts", "schedule"), [
    (4096, 7168, 160, 48, "balanced"),   # EP8 gate_up: ~3.8 items per CTA, whole items leave a ragged tail
    (7168, 2048, 160, 48, "strided"),    # EP8 down: ~6.6
    (512, 7168, 1280, 384, "balanced"),  # TP8 gate_up
    (7168, 256, 1280, 384, "strided"),   # TP8 down: ~53
])
def test_choose_schedule_by_items_per_cta(n: int, k: int, slots: int, experts: int, schedule: str) -> None:
    cfg = heuristics.choose_config(n, k, 8)
    blocks = (slots + experts * 7) // 8  # what align_block_size's tensors can hold
    chosen = heuristics.choose_schedule(cfg, blocks * cfg.ntiles(n), num_sms=132)
    assert chosen.schedule == schedule
    assert chosen == dataclasses.replace(cfg, schedule=schedule)
    general = heuristics.general_config(8)  # not balanced: left alone
    assert heuristics.choose_schedule(general, 10**6, num_sms=132) is general


def test_gemm_rejects_cpu_tensors_and_wrong_layouts() -> None:
    packed, scales = _random(2, 16, 32, seed=7)
    pw = chord_kernels.pack("indexed", packed, scales, profile="h200_ep8")
    a = torch.zeros(3, 32, dtype=torch.bfloat16)
    ids = torch.zeros(8, dtype=torch.int32)
    with pytest.raises(ChordInputError, match="cuda"):
        chord_kernels.indexed.gemm(a, pw, ids, ids[:1], ids[:1], block_m=8, top_k=1)
    with pytest.raises(ChordInputError, match="dtype"):
        chord_kernels.indexed.gemm(a.float(), pw, ids, ids[:1], ids[:1], block_m=8, top_k=1)


def test_pair_transpose_is_an_involution_giving_lane_columns() -> None:
    from chord_kernels.indexed.layout import _permute_nibbles, _transpose_pairs

    gen = torch.Generator().manual_seed(3)
    words = torch.randint(-(1 << 31), 1 << 31, (5, 4), generator=gen, dtype=torch.int64).to(torch.int32)
    out = _transpose_pairs(_permute_nibbles(words))
    assert torch.equal(_permute_nibbles(_transpose_pairs(out), inverse=True), words)
    for t in range(4):  # lane t, pair slot j: columns 2t + 8j (low nibble) and 2t + 8j + 1 (high)
        for j in range(4):
            w = out[:, t].to(torch.int64) & 0xFFFFFFFF
            src = words[:, j].to(torch.int64) & 0xFFFFFFFF
            assert torch.equal((w >> 4 * j) & 0xF, (src >> 4 * (2 * t)) & 0xF)
            assert torch.equal((w >> (16 + 4 * j)) & 0xF, (src >> 4 * (2 * t + 1)) & 0xF)


def test_nibble_permutation_matches_its_definition() -> None:
    from chord_kernels.indexed.layout import _NIBBLE_ORDER, _permute_nibbles

    words = torch.randint(-(2**31), 2**31 - 1, (4096,), dtype=torch.int32)
    words[:4] = torch.tensor([0, -1, 0x76543210, -(2**31)], dtype=torch.int32)
    out = _permute_nibbles(words)
    def nibble(w: torch.Tensor, i: int) -> torch.Tensor:
        return (w.to(torch.int64) >> (4 * i)) & 0xF
    for p, c in enumerate(_NIBBLE_ORDER):
        assert torch.equal(nibble(out, p), nibble(words, c))
    assert hex(int(out[2]) & 0xFFFFFFFF) == "0x75316420"
    assert torch.equal(_permute_nibbles(out, inverse=True), words)
