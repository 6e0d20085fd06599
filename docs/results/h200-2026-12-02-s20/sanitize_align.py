"""Session 20: the routing kernels under compute-sanitizer: both paths, small shapes, checked
against the PyTorch path."""
import torch

from chord_kernels import routing
from chord_kernels.ops import align

for tokens, top_k, experts, bm, mapped in ((37, 8, 384, 16, False), (300, 8, 384, 24, True), (5, 3, 13, 7, False),
                                           (0, 8, 384, 16, False)):
    gen = torch.Generator().manual_seed(tokens)
    ids = torch.randint(-1, experts + 1, (tokens, top_k), generator=gen, dtype=torch.int32)
    emap = None
    if mapped:
        emap = torch.full((experts,), -1, dtype=torch.int32)
        emap[48:96] = torch.arange(48, dtype=torch.int32)
    want = routing.align_block_size(ids, bm, experts, emap)
    for kw in ({"single_max_slots": 1 << 30}, {"single_max_slots": 0, "chunk_slots": 96}):
        o = (torch.full_like(want.sorted_token_ids, -7, device="cuda"),
             torch.full_like(want.expert_ids, -7, device="cuda"), torch.full((1,), -7, dtype=torch.int32, device="cuda"))
        align.align_into(ids.cuda().reshape(-1), None if emap is None else emap.cuda(), bm, experts, *o, **kw)
        got = [t.cpu() for t in o]
        assert torch.equal(got[0], want.sorted_token_ids) and torch.equal(got[1], want.expert_ids)
        assert torch.equal(got[2], want.num_tokens_post_padded)
print("sanitize_align: all equal")
