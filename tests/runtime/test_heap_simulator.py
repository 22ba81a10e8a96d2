"""The heap simulator on blocks whose best packing is known by hand."""

import pytest

from hlocc.errors import HloError
from hlocc.runtime.heap_simulator import (
    HeapBlock,
    best_fit,
    decreasing_size,
    live_bytes_lower_bound,
    pack,
    reuse_allocations,
)


def overlapping_pairs_disjoint(blocks, layout, alignment):
    for a in blocks:
        for b in blocks:
            if a.key < b.key and a.start <= b.end and b.start <= a.end and a.size and b.size:
                lo_a, lo_b = layout.offsets[a.key], layout.offsets[b.key]
                assert lo_a + a.size <= lo_b or lo_b + b.size <= lo_a, (a, b)
    assert all(offset % alignment == 0 for offset in layout.offsets.values())


# A and B start together; C (twice as big) starts when A is dead. Best fit in time order puts A
# low, so C does not fit in A's hole and goes on top (256); placing C first needs only B + C = 192.
BLOCKS = [HeapBlock(0, 0, 1, 64), HeapBlock(1, 0, 3, 64), HeapBlock(2, 2, 3, 128)]


def test_best_fit_in_time_order():
    layout = best_fit(BLOCKS, 64)
    assert layout.offsets == {0: 0, 1: 64, 2: 128} and layout.size == 256
    overlapping_pairs_disjoint(BLOCKS, layout, 64)


def test_decreasing_size_finds_the_optimum_and_auto_keeps_it():
    layout = decreasing_size(BLOCKS, 64)
    assert layout.size == 192 == live_bytes_lower_bound(BLOCKS, 64)
    overlapping_pairs_disjoint(BLOCKS, layout, 64)
    assert pack(BLOCKS, 64, "auto").algorithm == "decreasing-size"
    assert decreasing_size(BLOCKS, 64, limit=0) is None, "over its work budget the offline packer gives up"
    assert pack(BLOCKS, 64, "best-fit").size == 256


def test_freed_gaps_coalesce_and_the_top_shrinks():
    # a, b, c back to back; a and b die; d (128) fits exactly in their merged hole.
    blocks = [HeapBlock(0, 0, 0, 64), HeapBlock(1, 0, 0, 64), HeapBlock(2, 0, 2, 64), HeapBlock(3, 1, 2, 128)]
    layout = best_fit(blocks, 64)
    assert layout.offsets[3] == 0 and layout.size == 192


def test_sizes_round_up_to_the_alignment():
    blocks = [HeapBlock(0, 0, 1, 10), HeapBlock(1, 1, 2, 10), HeapBlock(2, 0, 0, 0)]
    layout = best_fit(blocks, 64)
    assert layout.offsets == {0: 0, 1: 64, 2: 0} and layout.size == 128
    assert live_bytes_lower_bound(blocks, 64) == 128


def test_allocations_are_reused_best_fit_and_grown():
    blocks = [HeapBlock(0, 0, 1, 100), HeapBlock(1, 0, 1, 50), HeapBlock(2, 2, 3, 40), HeapBlock(3, 2, 3, 200)]
    sizes, owner = reuse_allocations(blocks)
    # Block 3 (first at tick 2, larger first) grows the largest free allocation; block 2 takes the other.
    assert sizes == [200, 50] and owner == {0: 0, 1: 1, 3: 0, 2: 1}


def test_unknown_algorithm():
    with pytest.raises(HloError, match="unknown heap algorithm 'first-fit'"):
        pack(BLOCKS, 64, "first-fit")
