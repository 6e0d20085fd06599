"""The indexed decode layout: compressed-tensors int4 weights permuted into mma.sync A fragments.

The unit is an *atom*: 16 output channels (N) x 32 input channels (K, one scale group) of one
expert, 288 bytes = 72 int32 words, in the order a warp consumes it:

* words ``[0, 64)``: for lane ``l`` (``g = l // 4``, ``t = l % 4``) words ``2l`` and ``2l + 1`` hold
  the 8 codes lane ``l`` needs of channel ``g`` and channel ``g + 8``: the A-fragment columns of
  ``mma.m16n8k16`` (and of ``wgmma`` with A from registers) in natural K order, i.e. columns
  ``2t + 8j`` and ``2t + 8j + 1`` of the group for ``j = 0..3``. Pair ``j`` sits in stored nibbles
  ``j`` (the even column, bits 0-15) and ``j + 4`` (the odd column, bits 16-31), so
  ``(word >> 4j) & 0x000F000F`` yields the bf16x2 pair of A register ``j`` (K step ``j // 2``,
  register 0 or 2 of the fragment). Activations therefore stay in their natural order: ldmatrix
  (decode) and 16-byte copies into a swizzled wgmma tile (prefill) read them as they are.
* words ``[64, 72)``: word ``g`` packs the bf16 scales of channel ``g`` (bits 0-15) and channel
  ``g + 8`` (bits 16-31).

Atoms are grouped into *tiles* of 64 channels x 256 K (4 x 8 atoms, 9216 bytes): tile
``(nt, kt)`` of an expert holds atom rows ``4nt .. 4nt+3`` and scale groups ``8kt .. 8kt+7``,
ordered ``[row][group]``. Tiles of one 64-channel block follow each other along K, and blocks
follow each other along N, so the weights of any 64k channels x 256m K range of an expert are
contiguous runs the kernel fetches with one 1-D bulk async copy each (9 KB or more per copy:
large copies stream at the memory ceiling, small ones do not; docs/optimization.md, "Why tiles").
Edge tiles are narrower (fewer rows when ``ceil(N/16) % 4 != 0``, fewer groups when ``(K/32) % 8 != 0``) and stay
dense: the atom ``(r, g)`` of an expert sits at index ``4 KG nt + rows(nt) 8 kt + (r % 4) w(kt) + g % 8``
with ``nt = r // 4``, ``kt = g // 8``, ``rows(nt) = min(4, N16 - 4 nt)``, ``w(kt) = min(8, KG - 8 kt)``.

The tensor ``tiles`` is int32 ``[E, ceil(N/16) * K/32, 72]``. Channels past ``N`` are padding
(code 8, scale 0). Bytes per weight stay 0.5625, the same as the source. The layout is identical
for every profile (the TP8 prefill kernel reads the same bytes: a tile is exactly a 64-row
warpgroup M tile of ``wgmma`` with A from registers); the profile records which kernels and
heuristics the weight was packed for.
"""

from __future__ import annotations

import torch

from chord_kernels.errors import ChordInputError
from chord_kernels.formats import GROUP_SIZE, check_quantized
from chord_kernels.packed import PackedWeight, register_layout

ATOM_N = 16
"""Output channels per atom (mma M)."""
ATOM_K = GROUP_SIZE
"""Input channels per atom (one scale group, two mma K steps)."""
ATOM_WORDS = 72
"""int32 words per atom: 64 of codes, 8 of scale pairs."""
ATOM_BYTES = 4 * ATOM_WORDS
TILE_ROWS = 4
"""Atom rows (16 channels each) per tile: 64 channels."""
TILE_GROUPS = 8
"""Scale groups (32 K each) per tile: 256 K."""
PROFILE_ARCHS: dict[str, tuple[str, ...]] = {
    "h200_ep8": ("sm_90a",),
    "h200_tp8": ("sm_90a",),
    "b200_ep8": ("sm_100a",),
    "b300_ep8": ("sm_103a",),
}
"""Each profile and the architectures whose kernels and heuristics it was packed for."""
PROFILES: tuple[str, ...] = tuple(PROFILE_ARCHS)
"""``h200_ep8`` decode, ``h200_tp8`` (shared by decode and the prefill kernel), and the Blackwell
decode profiles (compile-checked only)."""
LAYOUT_VERSION = 2
"""2: natural K order inside a group (1, never released beyond this repository, permuted K)."""


SMALL_SCALE_BITS = 0x3D00
"""bf16 bits of 2^-5: the scales below it in magnitude allow the kernels' one-fma dequantization
(``chord/common/dequant.cuh``, ``PackedWeight.small_scales``)."""


def scales_are_small(scales: torch.Tensor) -> bool:
    """Whether every bf16 in ``scales`` has a magnitude below 2^-5 (NaN and infinity do not; False
    for meta tensors, which hold no values); a device read."""
    if scales.device.type == "meta":
        return False
    return bool(((scales.contiguous().view(torch.int16) & 0x7FFF) < SMALL_SCALE_BITS).all())


SCALE_READ_ATOMS = 1 << 22
"""Atoms whose scales :func:`tiles_have_small_scales` reads at a time (32 MB of scale words): a
whole projection's copy would be hundreds of MB next to the tiles."""


def tiles_have_small_scales(tiles: torch.Tensor) -> bool:
    """:func:`scales_are_small` of the scales inside packed ``tiles`` (int32 ``[..., 72]`` atoms),
    read :data:`SCALE_READ_ATOMS` atoms at a time."""
    atoms = tiles.reshape(-1, ATOM_WORDS)
    return all(scales_are_small(atoms[i:i + SCALE_READ_ATOMS, 64:].contiguous().view(torch.bfloat16))
               for i in range(0, atoms.shape[0], SCALE_READ_ATOMS))


def atom_positions(n16: int, kg: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """Index in the packed atom sequence of atom ``(r, g)``, as int64 ``[n16, kg]``."""
    r = torch.arange(n16, device=device).unsqueeze(1)
    g = torch.arange(kg, device=device).unsqueeze(0)
    nt, kt = r // TILE_ROWS, g // TILE_GROUPS
    rows = (n16 - TILE_ROWS * nt).clamp(max=TILE_ROWS)
    width = (kg - TILE_GROUPS * kt).clamp(max=TILE_GROUPS)
    return TILE_ROWS * kg * nt + rows * TILE_GROUPS * kt + (r % TILE_ROWS) * width + g % TILE_GROUPS

# Stored nibble p holds source column _NIBBLE_ORDER[p] of the word: even columns in the low half,
# odd columns in the high half.
_NIBBLE_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)


def _delta_swap(x: torch.Tensor, mask: int, shift: int) -> torch.Tensor:
    """Swap the bit groups selected by ``mask`` with those ``shift`` bits above them (int32).

    Arithmetic right shifts only fill bits 28-31, which no mask here selects, so plain int32
    arithmetic is exact.
    """
    t = ((x >> shift) ^ x) & mask
    return x ^ t ^ (t << shift)


def _permute_nibbles(words: torch.Tensor, inverse: bool = False) -> torch.Tensor:
    """Reorder the nibbles of int32 words to ``_NIBBLE_ORDER`` (or back, with ``inverse``).

    Two delta swaps: nibbles 1<->2 and 5<->6, then the nibble pairs (2,3)<->(4,5). Each is its own
    inverse, so undoing them in reverse order restores the source. Works in int32 throughout
    (a few passes over the data: the converter packs hundreds of GB with it).
    """
    steps = ((0x00F000F0, 4), (0x0000FF00, 8))
    x = words
    for mask, shift in reversed(steps) if inverse else steps:
        x = _delta_swap(x, mask, shift)
    return x


def _signed(mask: int) -> int:
    return mask - (1 << 32) if mask >= 1 << 31 else mask


def _transpose_pairs(words: torch.Tensor) -> torch.Tensor:
    """Transpose the 4 x 4 matrix of nibble pairs held by the 4 words of each K group.

    ``words[..., c]`` (last dimension 4) holds, after :func:`_permute_nibbles`, the pairs of columns
    ``8c + 2j, 8c + 2j + 1`` in pair slot ``j`` (nibbles ``j`` and ``j + 4``). The result's word ``t``
    holds pair ``t`` of word ``j`` in slot ``j``: columns ``2t + 8j, 2t + 8j + 1``, the A-fragment
    columns of lane ``t``. Two butterfly steps (slot bit 0 between words ``c, c ^ 1``, slot bit 1
    between ``c, c ^ 2``); the transpose is its own inverse.
    """
    out = words
    for step, (keep_lo, shift) in enumerate(((0x0F0F0F0F, 4), (0x00FF00FF, 8))):
        keep_hi = _signed(keep_lo ^ 0xFFFFFFFF)
        keep_lo = _signed(keep_lo)
        bit = 1 << step
        idx = torch.arange(4, device=words.device)
        partner = out[..., idx ^ bit]
        low_word = (idx & bit) == 0  # keeps its low slots, takes the partner's low slots moved up
        up = (out & keep_lo) | ((partner << shift) & keep_hi)
        down = (out & keep_hi) | ((partner >> shift) & keep_lo)
        out = torch.where(low_word, up, down)
    return out


class IndexedLayout:
    """Layout ``"indexed"``: see the module docstring."""

    name = "indexed"
    family = "indexed"
    mode = "indexed"
    version = LAYOUT_VERSION
    profiles = PROFILES

    def pack(self, packed: torch.Tensor, scales: torch.Tensor, profile: str, **options) -> PackedWeight:
        if options:
            raise ChordInputError(f"the {self.name} layout takes no options, got {sorted(options)}")
        if profile not in PROFILES:
            raise ChordInputError(f"profile: expected one of {list(PROFILES)}, got {profile!r}")
        n, k = check_quantized(packed, scales)
        if packed.dim() == 2:
            packed, scales = packed.unsqueeze(0), scales.unsqueeze(0)
        if packed.shape[0] == 0 or n == 0:
            raise ChordInputError(f"the {self.name} layout: expected at least one expert and one output channel, "
                                  f"got packed shape {list(packed.shape)}")
        e, kg = packed.shape[0], k // ATOM_K
        n16 = -(-n // ATOM_N)
        pad = n16 * ATOM_N - n
        if pad:
            packed = torch.cat([packed, packed.new_full((e, pad, k // 8), 0x88888888 - (1 << 32))], 1)
            scales = torch.cat([scales, scales.new_zeros((e, pad, kg))], 1)
        # words [E, n16, h, g, kg, t] -> [E, n16, kg, g, t, h]: lane = 4g + t, word = 2 lane + h.
        words = _transpose_pairs(_permute_nibbles(packed).reshape(e, n16 * ATOM_N, kg, 4))
        words = words.reshape(e, n16, 2, 8, kg, 4)
        words = words.permute(0, 1, 4, 3, 5, 2).reshape(e, n16, kg, 64)
        # scales [E, n16, h, g, kg] -> [E, n16, kg, g, h] -> bf16 pairs viewed as int32.
        sc = scales.reshape(e, n16, 2, 8, kg).permute(0, 1, 4, 3, 2).contiguous()
        sc = sc.view(torch.int32).reshape(e, n16, kg, 8)
        atoms = torch.cat([words, sc], dim=-1).reshape(e, n16 * kg, ATOM_WORDS)
        tiles = torch.empty_like(atoms)
        tiles[:, atom_positions(n16, kg, atoms.device).reshape(-1)] = atoms
        return PackedWeight(
            layout=self.name, family=self.family, mode=self.mode, profile=profile,
            layout_version=self.version, num_experts=e, n=n, k=k, group_size=GROUP_SIZE,
            tensors={"tiles": tiles},
            options={"atom_n": ATOM_N, "atom_k": ATOM_K, "tile_n": ATOM_N * TILE_ROWS,
                     "tile_k": ATOM_K * TILE_GROUPS},
            small_scales=scales_are_small(scales),
        )

    def small_scales(self, tensors: dict[str, torch.Tensor]) -> bool:
        """``PackedWeight.small_scales`` of packed ``tensors`` (what ``from_state_dict`` reads)."""
        tiles = tensors.get("tiles")
        return tiles is not None and tiles.dtype == torch.int32 and tiles.shape[-1:] == (ATOM_WORDS,) and \
            tiles_have_small_scales(tiles)

    def unpack(self, weight: PackedWeight) -> tuple[torch.Tensor, torch.Tensor]:
        weight.require(family=self.family, mode=self.mode, layout_version=self.version,
                       what=f"the {self.name} layout's unpack")
        tiles = weight.tensors.get("tiles")
        e, n, k = weight.num_experts, weight.n, weight.k
        kg, n16 = k // ATOM_K, -(-n // ATOM_N)
        if tiles is None or tuple(tiles.shape) != (e, n16 * kg, ATOM_WORDS) or tiles.dtype != torch.int32:
            got = None if tiles is None else (tuple(tiles.shape), tiles.dtype)
            raise ChordInputError(
                f"{self.name} weight: expected tensor 'tiles' int32 {[e, n16 * kg, ATOM_WORDS]}, got {got}"
            )
        tiles = tiles[:, atom_positions(n16, kg, tiles.device).reshape(-1)].reshape(e, n16, kg, ATOM_WORDS)
        words = tiles[..., :64].reshape(e, n16, kg, 8, 4, 2).permute(0, 1, 5, 3, 2, 4)
        words = _transpose_pairs(words.reshape(e, n16 * ATOM_N, kg, 4))
        packed = _permute_nibbles(words.reshape(e, n16 * ATOM_N, k // 8), inverse=True)
        sc = tiles[..., 64:].contiguous().view(torch.bfloat16).reshape(e, n16, kg, 8, 2)
        scales = sc.permute(0, 1, 4, 3, 2).reshape(e, n16 * ATOM_N, kg)
        return packed[:, :n].contiguous(), scales[:, :n].contiguous()


INDEXED_LAYOUT = register_layout(IndexedLayout())
