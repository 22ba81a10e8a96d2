"""Packing blocks with live ranges into memory, as XLA's HeapSimulator does for the temp buffer.

A block is a buffer's closed live range of ticks and its size; two blocks whose ranges overlap get
disjoint bytes. Offsets are multiples of the alignment and sizes are rounded up to it.

- `best-fit`: online, in tick order; a block takes the smallest free gap that holds it, or grows
  the heap at its end (XLA's classic best-fit heap). O(n log n + n·gaps).
- `decreasing-size`: offline, largest (then longest-lived) block first, each placed in the smallest
  gap left by the already placed blocks that overlap it in time (XLA's
  GlobalDecreasingSizeBestFitHeap). O(n·w) for w blocks live at once; skipped above a work budget.
- `auto`: both, keeping the smaller heap (XLA's ChooseBestHeapAlgorithm).

`reuse_allocations` is the other layout: each block in an allocation of its own, an allocation
reused by a later block once the earlier one is dead (best fit by size; growing the largest free
allocation when none fits).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from dataclasses import dataclass

from hlocc.errors import HloError

HEAP_ALGORITHMS = ("auto", "best-fit", "decreasing-size")
DECREASING_SIZE_WORK_LIMIT = 4_000_000  # pairs of blocks live at once that the offline packer may visit


@dataclass(frozen=True)
class HeapBlock:
    key: int
    start: int
    end: int
    size: int


@dataclass(frozen=True)
class HeapLayout:
    algorithm: str
    offsets: dict[int, int]
    size: int


def align_up(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


def best_fit(blocks: list[HeapBlock], alignment: int) -> HeapLayout:
    offsets: dict[int, int] = {}
    gaps: list[tuple[int, int]] = []  # free (offset, size) below `top`, sorted by offset, coalesced
    active: list[tuple[int, int, int, int]] = []  # (end, key, offset, size)
    top = heap_size = 0

    def release(offset: int, size: int) -> None:
        nonlocal top
        i = bisect_left(gaps, (offset, 0))
        if i < len(gaps) and offset + size == gaps[i][0]:
            size += gaps.pop(i)[1]
        if i > 0 and gaps[i - 1][0] + gaps[i - 1][1] == offset:
            offset, size = gaps[i - 1][0], gaps[i - 1][1] + size
            gaps.pop(i - 1)
            i -= 1
        if offset + size == top:
            top = offset
        else:
            gaps.insert(i, (offset, size))

    for block in sorted(blocks, key=lambda b: (b.start, -b.size, b.key)):
        while active and active[0][0] < block.start:
            _, _, offset, size = heapq.heappop(active)
            release(offset, size)
        size = align_up(block.size, alignment)
        if size == 0:
            offsets[block.key] = 0
            continue
        best = None
        for i, (_, gap) in enumerate(gaps):
            if gap >= size and (best is None or gap < gaps[best][1]):
                best = i
        if best is not None:
            offset, gap = gaps[best]
            if gap == size:
                gaps.pop(best)
            else:
                gaps[best] = (offset + size, gap - size)
        else:
            offset = top
            top += size
            heap_size = max(heap_size, top)
        offsets[block.key] = offset
        heapq.heappush(active, (block.end, block.key, offset, size))
    return HeapLayout("best-fit", offsets, heap_size)


def _overlapping(blocks: list[HeapBlock], limit: int) -> dict[int, list[HeapBlock]] | None:
    """For every block, the blocks whose ranges overlap its own (sweep over starts); None when that
    is more than `limit` pairs."""
    overlaps: dict[int, list[HeapBlock]] = {b.key: [] for b in blocks}
    active: list[HeapBlock] = []
    work = 0
    for block in sorted(blocks, key=lambda b: (b.start, b.key)):
        active = [a for a in active if a.end >= block.start]
        work += len(active)
        if work > limit:
            return None
        for other in active:
            overlaps[other.key].append(block)
            overlaps[block.key].append(other)
        active.append(block)
    return overlaps


def decreasing_size(blocks: list[HeapBlock], alignment: int,
                    limit: int = DECREASING_SIZE_WORK_LIMIT) -> HeapLayout | None:
    sized = [b for b in blocks if b.size > 0]
    overlaps = _overlapping(sized, limit)
    if overlaps is None:
        return None
    offsets = {b.key: 0 for b in blocks if b.size == 0}
    heap_size = 0
    for block in sorted(sized, key=lambda b: (-align_up(b.size, alignment), b.start - b.end, b.start, b.key)):
        size = align_up(block.size, alignment)
        taken = sorted((offsets[o.key], align_up(o.size, alignment)) for o in overlaps[block.key] if o.key in offsets)
        best_offset, best_gap, reach = None, None, 0
        for offset, length in taken:
            gap = offset - reach
            if gap >= size and (best_gap is None or gap < best_gap):
                best_offset, best_gap = reach, gap
            reach = max(reach, offset + length)
        offset = reach if best_offset is None else best_offset
        offsets[block.key] = offset
        heap_size = max(heap_size, offset + size)
    return HeapLayout("decreasing-size", offsets, heap_size)


def pack(blocks: list[HeapBlock], alignment: int, algorithm: str = "auto") -> HeapLayout:
    """Offsets of all blocks in one heap (see the module docstring for the algorithms)."""
    if algorithm not in HEAP_ALGORITHMS:
        raise HloError(f"unknown heap algorithm '{algorithm}' (known: {', '.join(HEAP_ALGORITHMS)})")
    if algorithm == "best-fit":
        return best_fit(blocks, alignment)
    offline = decreasing_size(blocks, alignment, limit=DECREASING_SIZE_WORK_LIMIT if algorithm == "auto" else 1 << 62)
    if algorithm == "decreasing-size":
        return offline
    online = best_fit(blocks, alignment)
    return offline if offline is not None and offline.size < online.size else online


def reuse_allocations(blocks: list[HeapBlock]) -> tuple[list[int], dict[int, int]]:
    """One allocation per live block, reusing dead ones: (allocation sizes, block key -> allocation)."""
    sizes: list[int] = []
    owner: dict[int, int] = {}
    free: list[tuple[int, int]] = []  # (size, allocation), sorted
    active: list[tuple[int, int]] = []  # (end, allocation)
    for block in sorted(blocks, key=lambda b: (b.start, -b.size, b.key)):
        while active and active[0][0] < block.start:
            _, allocation = heapq.heappop(active)
            insort(free, (sizes[allocation], allocation))
        i = bisect_left(free, (block.size, -1))
        if i < len(free):
            _, allocation = free.pop(i)
        elif free:
            _, allocation = free.pop()  # the largest free one, grown
            sizes[allocation] = block.size
        else:
            allocation = len(sizes)
            sizes.append(block.size)
        owner[block.key] = allocation
        heapq.heappush(active, (block.end, allocation))
    return sizes, owner


def live_bytes_lower_bound(blocks: list[HeapBlock], alignment: int) -> int:
    """The most bytes live at one tick: no packing needs less."""
    events: dict[int, int] = {}
    for b in blocks:
        size = align_up(b.size, alignment)
        events[b.start] = events.get(b.start, 0) + size
        events[b.end + 1] = events.get(b.end + 1, 0) - size
    live = peak = 0
    for tick in sorted(events):
        live += events[tick]
        peak = max(peak, live)
    return peak


@dataclass(frozen=True)
class SymbolicSlots:
    """`reuse_slots`'s result: the size of each slot (a size, or a fresh variable `slot<k>` whose value
    is the largest of `maxima[name]` at run time), and each block's slot."""

    sizes: list
    owner: dict[int, int]
    maxima: dict[str, tuple]


def reuse_slots(blocks: list[HeapBlock]) -> SymbolicSlots:
    """`reuse_allocations` for blocks of symbolic sizes (hlo/symbolic.py): a block takes a dead slot
    (one whose blocks all ended before it starts), one that already holds a block of its exact size
    expression first, else the best fit at the size hint (a heuristic: call it under `size_hint`),
    else a new slot. Which blocks share a slot is decided once; a slot's size is the largest of its
    blocks' sizes, known to be the largest for every binding or left to the shape function as a
    `max` (the `slot<k>` variables of `maxima`), so the sharing is correct at every size."""
    members: list[list] = []
    owner: dict[int, int] = {}
    free: list[int] = []
    active: list[tuple[int, int]] = []  # (end, slot)
    for block in sorted(blocks, key=lambda b: (b.start, b.key)):
        while active and active[0][0] < block.start:
            free.append(heapq.heappop(active)[1])
        slot = _pick_slot(free, members, block.size)
        if slot is None:
            slot = len(members)
            members.append([])
        else:
            free.remove(slot)
        members[slot].append(block.size)
        owner[block.key] = slot
        heapq.heappush(active, (block.end, slot))
    sizes, maxima = [], {}
    for k, sizes_of_slot in enumerate(members):
        largest = _largest(list(dict.fromkeys(sizes_of_slot)))
        if largest is None:
            from hlocc.hlo.symbolic import symbol

            maxima[f"slot{k}"] = tuple(dict.fromkeys(sizes_of_slot))
            largest = symbol(f"slot{k}")
        sizes.append(largest)
    return SymbolicSlots(sizes, owner, maxima)


def _pick_slot(free: list[int], members: list[list], size) -> int | None:
    exact = [s for s in free if size in members[s]]
    if exact:
        return exact[0]
    if not free:
        return None
    largest = {s: max(float(m) if not isinstance(m, int) else m for m in members[s]) for s in free}
    need = float(size) if not isinstance(size, int) else size
    fits = [s for s in free if largest[s] >= need]
    return min(fits, key=largest.get) if fits else max(free, key=largest.get)


def _largest(sizes: list):
    """The size that is ≥ every other for every binding, or None when that depends on the binding.
    Every binding includes sizes of 0, which a call may pass (hlo/symbolic.py's comparisons assume
    variables ≥ 1, as JAX's do): each variable v is proved over as v' - 1 with v' ≥ 1 (`32*n ≥ 4`
    holds for n ≥ 1, not at n = 0, where a scalar sharing a slot sized 32*n was written past it)."""
    from hlocc.hlo.symbolic import DimExpr, InconclusiveDimensionError, size_hint, substitute, symbol

    variables = sorted({v for size in sizes if isinstance(size, DimExpr) for v in size.variables})
    from_zero = {v: symbol(v) - 1 for v in variables}
    with size_hint(None):  # for every binding, not at the hint
        for candidate in sizes:
            try:
                if all(substitute(candidate - other, from_zero) >= 0 for other in sizes):
                    return candidate
            except InconclusiveDimensionError:
                continue
    return None
