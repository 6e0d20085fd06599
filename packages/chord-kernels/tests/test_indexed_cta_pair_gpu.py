"""The WGMMA kernel in clusters of two CTAs sharing each item's gathered rows (``WgmmaConfig.cta_pair``) on
an H100/H200: against the reference and bit for bit against the same configuration unpaired, on fresh
random data with poisoned outputs, ragged routing (an expert map, a hot expert, experts of one block, M = 0
and M = 1), listed and walked items, both schedules; and the N it refuses (CUDA-graph replay: the paired case of
test_indexed_wgmma_gpu.py's)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from test_indexed_gpu import _rel_err, _shuffled_blocks, _weights
from test_indexed_wgmma_gpu import _mapped_outputs

import chord_kernels
from chord_kernels import reference
from chord_kernels.errors import ChordInputError
from chord_kernels.indexed import gemm, plan, routing_capacity
from chord_kernels.indexed.wgmma import WgmmaConfig, choose_wgmma_config, wide16_config
from chord_kernels.routing import align_block_size

pytestmark = pytest.mark.gpu
REL_TOL = 5e-3

# The gate_up items the plan pairs (session 66): the wide items of ten 16-token blocks (EP) and of seven 24-token
# blocks (TP8, EP beyond 136 rows per expert), both on the weight ring, at rows per expert that part-fill them;
# and, paired by hand, items on 256-K stages (one block of 80 tokens, 64 x 2), which a caller may pass.
PAIRED = {
    "16x10_ring": (4096, 16, wide16_config(4096, 7168), 130.0),
    "24x7_ring": (4096, 24, choose_wgmma_config(4096, 7168, 24, 145.0), 145.0),
    "tp8_24x7_ring": (512, 24, choose_wgmma_config(512, 7168, 24, 128.0), 128.0),
    "bm80_by_hand": (4096, 80, dataclasses.replace(choose_wgmma_config(4096, 7168, 80, 64.0), cta_pair=True), 64.0),
    "64x2_by_hand": (4096, 64, dataclasses.replace(choose_wgmma_config(4096, 7168, 64, 341.0), cta_pair=True), 150.0),
}


@pytest.mark.parametrize("silu", [True, False], ids=["silu", "plain"])
@pytest.mark.parametrize("name", list(PAIRED))
def test_pair_bit_identical_to_unpaired(name: str, silu: bool) -> None:
    """Each paired gate_up configuration gives the unpaired kernel's bits (the same wgmmas on the same rows;
    only which CTA gathered them differs) and the reference's values, twice the same: an expert map keeping
    a quarter of 192 experts, Poisson rows per expert that part-fill the items, poisoned outputs (plain: with
    top-k weights)."""
    n, block_m, config, tok_e = PAIRED[name]
    assert config.cta_pair, f"the plan pairs {name}: {config}"
    assert config.weight_ring == ("ring" in name)
    configs = [config, config, dataclasses.replace(config, cta_pair=False)]
    outs, ref = _mapped_outputs(n, 7168, block_m, tok_e, silu, configs, seed=66 + block_m + silu)
    assert not outs[0].isnan().any(), "rows never written"
    assert _rel_err(outs[0], ref) <= REL_TOL
    assert torch.equal(outs[0], outs[2]), "pairing changed the result"
    assert torch.equal(outs[0], outs[1]), "repeated runs differ"


@pytest.mark.parametrize("routing", ["hot", "sparse"])
def test_pair_hot_and_sparse_experts(routing: str) -> None:
    """Every row on one expert (items of the full ten blocks back to back), or on two of 48 (the other
    experts empty), in the wide ring items and a one-block item, against the unpaired kernel."""
    for n, block_m, config, tok_e in (PAIRED["16x10_ring"], PAIRED["bm80_by_hand"]):
        outs, _ = _mapped_outputs(n, 7168, block_m, tok_e, True, [config, dataclasses.replace(config, cta_pair=False)],
                                  seed=7, routing=routing)
        assert not outs[0].isnan().any()
        assert torch.equal(outs[0], outs[1]), f"pairing changed the result ({routing}, {config})"


@pytest.mark.parametrize("rows", [0, 1, 3])
def test_pair_empty_and_tiny_batches(rows: int) -> None:
    """M = 0 (every block unused: the pair's CTAs meet only at the done unit), M = 1 and 3 rows (items of one
    part-filled block: the second CTA's half is empty, nothing pushed), K = 512 (two stages)."""
    n, block_m, config, _ = PAIRED["bm80_by_hand"]
    gen = torch.Generator(device="cuda").manual_seed(5 + rows)
    packed, scales = _weights(8, n, 512, gen)
    pw = chord_kernels.pack("indexed", packed, scales, profile="h200_ep8")
    ids = torch.rand(rows, 8, generator=gen, device="cuda").argsort(dim=1)[:, :2]
    r = align_block_size(ids, block_m, 8)
    a = torch.randn(rows, 512, generator=gen, device="cuda").to(torch.bfloat16)
    out = torch.full((rows * 2, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    gemm(a, pw, r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded, block_m=block_m, top_k=2, out=out,
         config=config)
    torch.cuda.synchronize()
    ref = reference.indexed_gemm(a, (packed, scales), r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded,
                                 block_m=block_m, top_k=2)
    assert not out.isnan().any()
    if rows:
        assert _rel_err(out, ref) <= REL_TOL


@pytest.mark.parametrize("dynamic", [False, True], ids=["strided", "dynamic"])
@pytest.mark.parametrize("walk", [False, True], ids=["listed", "walked"])
def test_pair_items_over_shuffled_blocks(walk: bool, dynamic: bool) -> None:
    """Routing blocks in a random order (an expert's blocks in several runs), listed in shared memory or
    walked (more blocks than the list holds: the walk skips blocks that start no item, units of no stages
    the first CTA hands the second back to back), K with a short last stage, N with a partial last tile, on
    the weight ring's 128-K stages."""
    gen = torch.Generator(device="cuda").manual_seed(29 + walk)
    e, n, k, top_k, block_m = 64, 1856, 800, 3, 16
    rows = 60000 if walk else 600  # (walked: more routing blocks than the ring kernel's list of ~9100 holds)
    config = WgmmaConfig(block_m, 2, 128, 3, items=8, dynamic=dynamic, weight_ring=True, cta_pair=True)
    assert config.ntiles(n) % 2 == 0 and n % config.block_n
    packed, scales = _weights(e, n, k, gen)
    pw = chord_kernels.pack("indexed", packed, scales, profile="h200_ep8")
    ids = torch.rand(rows, e, generator=gen, device="cuda").argsort(dim=1)[:, :top_k]
    r = align_block_size(ids, block_m, e)
    sorted_ids, expert_ids, used = _shuffled_blocks(r, block_m, gen)
    launch = plan(pw, block_m=block_m, capacity=routing_capacity(sorted_ids, expert_ids, block_m), config=config)
    assert (launch.list_cap < used) == walk, (launch.list_cap, used)
    assert launch.grid % 2 == 0
    a = torch.randn(rows, k, generator=gen, device="cuda").to(torch.bfloat16)
    outs = []
    for cfg in (config, dataclasses.replace(config, cta_pair=False)):
        out = torch.full((rows * top_k, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        gemm(a, pw, sorted_ids, expert_ids, r.num_tokens_post_padded, block_m=block_m, top_k=top_k, out=out,
             config=cfg)
        outs.append(out)
    ref = reference.indexed_gemm(a, (packed, scales), sorted_ids, expert_ids, r.num_tokens_post_padded,
                                 block_m=block_m, top_k=top_k)
    assert not outs[0].isnan().any()
    assert _rel_err(outs[0], ref) <= REL_TOL
    assert torch.equal(outs[0], outs[1]), "pairing changed the result"


def test_pair_refuses_an_odd_n_tile_count() -> None:
    gen = torch.Generator(device="cuda").manual_seed(3)
    packed, scales = _weights(4, 768, 512, gen)  # three 256-row N tiles
    pw = chord_kernels.pack("indexed", packed, scales, profile="h200_ep8")
    r = align_block_size(torch.zeros(8, 1, dtype=torch.int64, device="cuda"), 56, 4)
    a = torch.randn(8, 512, generator=gen, device="cuda").to(torch.bfloat16)
    with pytest.raises(ChordInputError, match="N tiles in pairs"):
        gemm(a, pw, r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded, block_m=56, top_k=1,
             config=WgmmaConfig(56, 2, 256, 3, cta_pair=True))
