"""The balanced schedule's split-item bookkeeping, emulated on the CPU.

Mirrors decode.cuh (balanced_start, owner_of_unit, the part count of finish_split_part) and checks
that every item cut by a CTA range boundary is finished exactly once, by the last of its parts,
from partials that sit in distinct workspace slots.
"""

from __future__ import annotations

import random


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
