"""The split-K bookkeeping of the indexed kernels' schedules, emulated on the CPU.

The balanced schedule mirrors decode.cuh (balanced_start, owner_of_unit, the part count of
finish_split_part): every item cut by a CTA range boundary is finished exactly once, by the last of
its parts, from partials that sit in distinct workspace slots. The WGMMA kernel's split tail mirrors
scheduler.cuh (tail_split, part_stages) and wgmma.cuh (the producer's unit mapping, the header bits,
the workspace slots and counters of arrive_tail_part), and its cut into runs of routing blocks
(kTailBlocks); ``tail_split`` is the host's copy in ``chord_kernels.indexed.wgmma``.
"""

from __future__ import annotations

import itertools
import random

from chord_kernels.indexed.wgmma import tail_split


def balanced_start(units: int, cta: int, grid: int) -> int:
    return units * cta // grid


def owner_of_unit(u: int, units: int, grid: int) -> int:
    c = min(grid - 1, (u + 1) * grid // units)
    while c > 0 and balanced_start(units, c, grid) > u:
        c -= 1
    while c + 1 < grid and balanced_start(units, c + 1, grid) <= u:
        c += 1
    return c


def device_part_count(owner: int, last_unit: int, units: int, grid: int) -> int:
    parts = 1
    for c in range(owner + 1, grid):
        start = balanced_start(units, c, grid)
        if start > last_unit:
            break
        parts += balanced_start(units, c + 1, grid) != start
    return parts


def test_split_items_have_one_finisher_and_distinct_slots() -> None:
    rng = random.Random(0)
    for _ in range(4000):
        total, num_kc, grid = rng.randint(1, 60), rng.randint(1, 12), rng.randint(1, 300)
        units = total * num_kc
        ranges = [(balanced_start(units, c, grid), balanced_start(units, c + 1, grid)) for c in range(grid)]
        slots: set[tuple[int, int]] = set()
        for item in range(total):
            first, last = item * num_kc, item * num_kc + num_kc - 1
            holders = [c for c, (lo, hi) in enumerate(ranges) if lo < hi and lo <= last and hi > first]
            owner = owner_of_unit(first, units, grid)
            lo, hi = ranges[owner]
            assert lo <= first < hi, "the owner's range holds the item's first stage"
            assert holders[0] == owner
            if len(holders) == 1:
                continue  # not split: finished in registers, no slot
            assert device_part_count(owner, last, units, grid) == len(holders)
            for c in holders:
                starts_late = ranges[c][0] > first
                slot = (c, 0 if starts_late else 1)
                assert slot not in slots, f"two parts share workspace slot {slot}"
                slots.add(slot)


# scheduler.cuh / wgmma.cuh, line for line.
PART_SHIFT, PARTS_SHIFT, TAIL_SHIFT, PART_MASK = 18, 24, 16, 63


def part_stages(part: int, parts: int, num_kc: int) -> tuple[int, int]:
    return num_kc * part // parts, num_kc * (part + 1) // parts


def unit_of(item: int, full: int, parts: int, num_kc: int) -> tuple[int, int, int, int, int]:
    """The producer's mapping of a unit: (item, kc0, kc1, Header::width bits, Header::ntile bits)."""
    if item < full:
        return item, 0, num_kc, 0, 0
    v = item - full
    part = v % parts
    kc0, kc1 = part_stages(part, parts, num_kc)
    return full + v // parts, kc0, kc1, (part << PART_SHIFT) | (parts << PARTS_SHIFT), (v // parts) << TAIL_SHIFT


def test_split_tail_covers_every_stage_once_and_finishes_each_item_once() -> None:
    rng = random.Random(1)
    from chord_kernels.indexed.wgmma import TAIL_PARTS_MAX
    for _ in range(4000):
        grid, num_kc = rng.randint(1, 264), rng.randint(1, 40)
        total, max_parts = rng.randint(0, 4 * grid), rng.randint(2, TAIL_PARTS_MAX)
        full, parts = tail_split(total, grid, num_kc, max_parts)
        units = full + (total - full) * parts
        tail = total - full
        if parts == 1:
            assert full == total, "no split: every unit a whole item"
        else:
            assert full % grid == 0 and 0 < tail <= grid // 2, "only a last round of at most half the grid is cut"
            assert units - full <= grid, "the parts fill at most one round: one per CTA under the strided order"
            assert parts <= min(max_parts, num_kc)
        covered: dict[int, list[tuple[int, int]]] = {}
        slots: set[int] = set()
        for u in range(units):
            item, kc0, kc1, width_bits, ntile_bits = unit_of(u, full, parts, num_kc)
            assert 0 <= kc0 < kc1 <= num_kc, "every unit runs at least one stage"
            covered.setdefault(item, []).append((kc0, kc1))
            if u >= full:
                # The consumer decodes the part from the header; the slot and counter follow.
                p, n, t = (width_bits >> PART_SHIFT) & PART_MASK, (width_bits >> PARTS_SHIFT) & PART_MASK, ntile_bits >> TAIL_SHIFT
                assert (n, p, t) == (parts, (u - full) % parts, (u - full) // parts)
                assert part_stages(p, n, num_kc) == (kc0, kc1)
                slot = t * n + p
                assert slot < grid and slot not in slots, "one workspace slot per part"
                slots.add(slot)
                assert t < grid, "one counter per tail item (and consumer warpgroup)"
        assert sorted(covered) == list(range(total))
        for item, ranges in covered.items():
            ranges.sort()
            assert ranges[0][0] == 0 and ranges[-1][1] == num_kc, f"item {item}: K from its first stage to its last"
            assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges)), f"item {item}: parts meet, never overlap"
            assert len(ranges) == (1 if item < full else parts)


def block_run_of(unit: int, full: int, parts: int, blocks: int) -> tuple[int, int] | None:
    """The kTailBlocks producer's run of a unit whose item has ``blocks`` routing blocks: (first
    block, blocks), or None where the item has too few blocks for the unit's part."""
    if unit < full:
        return 0, blocks
    part, per = (unit - full) % parts, -(-blocks // parts)
    return None if part * per >= blocks else (part * per, min(per, blocks - part * per))


def test_split_tail_into_blocks_runs_every_block_once_within_one_round() -> None:
    rng = random.Random(2)
    for _ in range(4000):
        grid, items = rng.randint(1, 264), rng.choice([2, 3, 4, 7])
        total, max_parts = rng.randint(0, 4 * grid), rng.choice([2, 4, 8])
        blocks = [rng.randint(1, items) for _ in range(total)]
        full, parts = tail_split(total, grid, items, max_parts)  # (wgmma.cuh: at most kItems parts)
        units = full + (total - full) * parts
        assert units - full <= grid and parts <= min(items, max_parts)
        runs: set[tuple[int, int]] = set()
        for u in range(units):
            item = u if u < full else full + (u - full) // parts
            run = block_run_of(u, full, parts, blocks[item])
            if run is None:
                assert u >= full, "a whole item always runs"
                continue
            first, n = run
            assert n >= 1 and (u < full or n <= -(-blocks[item] // parts))
            for b in range(first, first + n):
                assert (item, b) not in runs, f"item {item}: block {b} run twice"
                runs.add((item, b))
        assert runs == {(i, b) for i in range(total) for b in range(blocks[i])}, "every block of every item run"


def test_split_tail_takes_the_sparse_last_round_of_a_hot_expert() -> None:
    # Session 53's ep8_tok16 draw: 400 gate_up items on 132 SMs leave 4 in a fourth round; 28 stages
    # of 256 K. The tail's 4 items become 4 x 8 parts, so no CTA runs more than three items and a part.
    assert tail_split(400, 132, 28, 8) == (396, 8)
    assert tail_split(384, 132, 28, 8) == (384, 1)  # the uniform draw's 2.91 rounds: 120 in the last, not cut
    assert tail_split(3, 132, 8, 32) == (0, 8)  # a few items, every one cut (at most its stages)
    assert tail_split(70, 132, 28, 8) == (70, 1)  # more than half the grid: no gain from halves
