"""Launch parameters of the reduction emitter: `Tiling`, how threads and blocks cover the normalised
reduce input on a GPU (XLA's reduction tiling: a warp of 32, up to 512 threads per row, 32x32 column
tiles) or on the CPU (a warp of 1: one thread per row or per chunk of adjacent columns), and the
range variables of a CPU column thread's columns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hlocc.analysis.affine_expr import sym
from hlocc.analysis.indexing_map import Variable
from hlocc.analysis.interval import Interval
from hlocc.analysis.reduction_info import ReductionDimensions, ReductionEmitterKind
from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.types import Shape

MAX_ROW_THREADS = 512
CPU_COLUMN_BYTES = 1024
"""Bytes of adjacent columns a CPU thread of a column reduction accumulates (vectors of
accumulators, `CPU_MAX_COLUMN_LANES` lanes each): each row it reads is 16 cache lines long. Rows
are a whole page apart in a large input, so the loads of a thread cost a TLB lookup per row; 256
bytes per row ran an f32[4096,4096] column sum 1.4-2.4x faster than 64 (one cache line), and
1024 bytes (four vectors of 64 lanes) about 1.15x faster than 256."""
CPU_MAX_COLUMN_LANES = 64
"""The longest vector `vectorize-loads-stores` makes: a thread's columns are groups of this many."""
CPU_MIN_COLUMN_THREADS = 8
"""Column chunks are narrowed (down to one vector) until there are this many, for the thread pool."""
CPU_BLOCK_ELEMENTS = 1 << 14
"""Input elements a CPU block covers: enough that the thread pool's hand-off is amortised."""


@dataclass(frozen=True)
class Tiling:
    """How threads cover the normalised input. Rows: `threads_per_row` threads (a power of two, or
    a multiple of the warp) share a row, `rows_per_block` rows per block, each thread reads
    `vector` adjacent elements per step. Columns: a block is a tile of `tile_rows` threads ×
    `tile_columns` columns (`lanes` adjacent columns per thread on the CPU, in `groups` vectors)."""

    row: bool
    threads_per_block: int
    blocks: int
    threads_per_row: int = 1
    rows_per_block: int = 1
    vector: int = 1
    tile_columns: int = 1
    lanes: int = 1
    groups: int = 1


def reduction_tiling(dims: ReductionDimensions, kind: ReductionEmitterKind, input_shape: Shape,
                     reduces: Sequence[HloInstruction], warp_size: int) -> Tiling:
    """How threads cover the normalised input of `reduces` (see `Tiling`) on a target with the
    given warp size (1: the CPU)."""
    b_or_m, k_or_r, r_or_n = dims.dimensions
    warp = warp_size
    if dims.is_row_reduction:
        kept, reduced = k_or_r, r_or_n
        if warp == 1:
            rows = max(1, min(kept, CPU_BLOCK_ELEMENTS // max(1, reduced * b_or_m)))
            return Tiling(True, rows, -(-kept // rows), rows_per_block=rows)
        if kind is ReductionEmitterKind.MULTI_ROW or reduced <= warp:
            per_row = 1
            while per_row < min(reduced, warp):
                per_row *= 2
            rows = max(1, min(kept, 256 // per_row))
            return Tiling(True, per_row * rows, -(-kept // rows), threads_per_row=per_row, rows_per_block=rows)
        bits = input_shape.element_type.bits
        vec = 2 if reduced % 2 == 0 and bits <= 32 and reduced >= 2 * warp * 2 else 1
        per_row = min(MAX_ROW_THREADS, _ceil(_ceil(reduced, vec), warp) * warp)
        return Tiling(True, per_row, kept, threads_per_row=per_row, vector=vec)
    major, _, minor = dims.dimensions
    if warp == 1:
        complex_values = any(r.operand(k).shape.element_type.is_complex for r in reduces
                             for k in range(len(r.operands) // 2))
        widest = max(max(r.operand(k).shape.element_type.bits, 8) for r in reduces
                     for k in range(len(r.operands) // 2))
        # (no vectors of complex numbers)
        lanes = 1 if complex_values else CPU_COLUMN_BYTES * 8 // widest
        while lanes > 1 and (minor % lanes or lanes > CPU_MAX_COLUMN_LANES
                             and major * (minor // lanes) < CPU_MIN_COLUMN_THREADS):
            lanes //= 2
        chunks = minor // lanes
        per_block = max(1, min(chunks, CPU_BLOCK_ELEMENTS // max(1, dims.dimensions[1] * lanes)))
        blocks = major * -(-chunks // per_block)
        return Tiling(False, per_block, blocks, tile_columns=per_block * lanes, lanes=lanes,
                      groups=max(1, lanes // CPU_MAX_COLUMN_LANES))
    columns = -(-minor // warp)
    return Tiling(False, warp * warp, major * columns, threads_per_row=warp, tile_columns=warp)


def column_lanes(t: Tiling) -> tuple[Variable, ...]:
    """The range variables of a CPU column thread's columns: (group, lane), or (lane) for one group."""
    lane = Variable(Interval(0, t.lanes // t.groups - 1), "lane")
    return (Variable(Interval(0, t.groups - 1), "group"), lane) if t.groups > 1 else (lane,)


def column_offset(t: Tiling, first: int):
    """The column within a CPU thread's chunk, from `column_lanes` numbered from symbol `first`."""
    return sym(first) * (t.lanes // t.groups) + sym(first + 1) if t.groups > 1 else sym(first)


def _ceil(a: int, b: int) -> int:
    return -(-a // b)
