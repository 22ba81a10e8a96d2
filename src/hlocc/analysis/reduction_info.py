"""Reduction classification for hero analysis (xla/service/gpu/reduction_utils.cc; facts §4.1).

A reduce is normalised, through its operand's layout, into three numbers:

- a **row** reduction [batch, kept, minor-reduced]: the most minor dimensions are reduced (plus
  possibly major ones, the "batch");
- a **column** reduction [major-kept, reduced, minor-kept]: reduced dimensions lie between kept
  ones.

All dimensions reduced is the row reduction [1, 1, N]. The reduction emitter handles a reduce
("reduction from or to contiguous dimensions") when its kept or its reduced dimensions are
consecutive in the layout and the emitter beats the elemental loop: a row reduction needs a
minor-reduced size ≥ the warp size or dividing it; a column reduction is left to the loop emitter
when it is small (major < 32, or major < 64 and minor < 32, ...). A reduce that is not the fusion
root but has an epilogue is a "real hero" only when it is race free (one block sees a whole row:
minor-reduced ≤ 1024·16 and batch ≤ 8; or a whole column: reduced ≤ 32·128).

`reduction_emitter` picks among XLA's four reduction emitters (row, multi-row, column,
small-column) for a target with `warp_size` and `core_count`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.shape_util import dimensions_consecutive, static_dims, static_elements
from hlocc.hlo.types import Shape

WARP_SIZE = 32
"""XLA's warp size, which its reduction and emitter-choice rules are written for."""
MIN_THREADS_X_ROW_REDUCTION = 1024
BATCHED_REDUCTION_RACE_FREE_BOUND = 8
ROW_REDUCTION_TILE_X = 16
COLUMN_REDUCTION_TILE_Y = 128
MULTI_ROW_THREADS_PER_BLOCK_TARGET = 256


@dataclass(frozen=True)
class ReductionDimensions:
    """A reduce normalised to three dimensions (see the module doc)."""

    is_row_reduction: bool
    dimensions: tuple[int, int, int]

    def __str__(self) -> str:
        kind = "row" if self.is_row_reduction else "column"
        return f"{kind} reduction [{','.join(map(str, self.dimensions))}]"


class ReductionEmitterKind(Enum):
    """The reduction emitter XLA would pick (CreateReductionFusion)."""

    ROW = "row"
    MULTI_ROW = "multi_row"
    COLUMN = "column"
    SMALL_COLUMN = "small_column"


def _partition_by_middle(shape: Shape, middle: set[int]) -> list[int]:
    """(major, middle, minor) sizes of a shape around consecutive `middle` dims (layout order)."""
    values = [1, 1, 1]
    segment = 2  # minor, then middle (1), then major (0)
    dims = static_dims(shape)
    for d in shape.minor_to_major:
        if segment == 2 and d in middle:
            segment = 1
        elif segment == 1 and d not in middle:
            segment = 0
        values[segment] *= dims[d]
    return values


def reduction_dimensions(reduce: HloInstruction) -> ReductionDimensions:
    """The row/column normal form of a reduce (XLA's GetReductionKindAndContiguousComponents)."""
    shape = reduce.operand(0).shape
    reduced = set(reduce.attrs["dimensions"])
    kept = [d for d in range(shape.rank) if d not in reduced]
    if not kept:
        return ReductionDimensions(True, (1, 1, static_elements(shape)))
    if dimensions_consecutive(shape, kept):
        major, middle, minor = _partition_by_middle(shape, set(kept))
        if middle == 1:
            return ReductionDimensions(True, (1, 1, major * minor))
        if minor == 1:
            return ReductionDimensions(False, (1, major, middle))
        return ReductionDimensions(True, (major, middle, minor))
    major, middle, minor = _partition_by_middle(shape, reduced)
    if minor == 1:
        return ReductionDimensions(True, (1, major, middle))
    return ReductionDimensions(False, (major, middle, minor))


def unnested_reduction_is_faster(dims: ReductionDimensions, warp_size: int = WARP_SIZE) -> bool:
    """Whether the reduction emitter beats the loop emitter (IsUnnestedReductionFasterThanElemental)."""
    if dims.is_row_reduction:
        minor = dims.dimensions[2]
        return minor >= warp_size or (minor > 0 and warp_size % minor == 0)
    major, minor = dims.dimensions[1], dims.dimensions[2]
    prefer_loop = (major < warp_size or (major < 2 * warp_size and minor < warp_size)
                   or (major < 4 * warp_size and minor < 8) or (major < 8 * warp_size and minor < 3))
    return not prefer_loop


def is_reduction_from_or_to_contiguous_dimensions(instr: HloInstruction, warp_size: int = WARP_SIZE) -> bool:
    """Whether the reduction emitter handles this reduce (see the module doc)."""
    if instr.opcode != "reduce":
        return False
    shape = instr.operand(0).shape
    reduced = list(instr.attrs["dimensions"])
    kept = [d for d in range(shape.rank) if d not in set(reduced)]
    if not (dimensions_consecutive(shape, kept) or dimensions_consecutive(shape, reduced)):
        return False
    return unnested_reduction_is_faster(reduction_dimensions(instr), warp_size)


def reduction_is_race_free(dims: ReductionDimensions, warp_size: int = WARP_SIZE) -> bool:
    """Whether one block reduces a whole row (column), so an epilogue may follow the reduce."""
    if dims.is_row_reduction:
        bound = MIN_THREADS_X_ROW_REDUCTION * ROW_REDUCTION_TILE_X
        return dims.dimensions[2] <= bound and dims.dimensions[0] <= BATCHED_REDUCTION_RACE_FREE_BOUND
    return dims.dimensions[1] <= warp_size * COLUMN_REDUCTION_TILE_Y


def is_real_reduction_hero(root: HloInstruction, hero: HloInstruction, warp_size: int = WARP_SIZE) -> bool:
    """A reduce hero that makes its fusion a reduction fusion: handled by the reduction emitter
    and either the root itself or race free (XLA's IsRealReductionHero)."""
    if not is_reduction_from_or_to_contiguous_dimensions(hero, warp_size):
        return False
    return root is hero or reduction_is_race_free(reduction_dimensions(hero), warp_size)


def reductions_compatible(a: HloInstruction, b: HloInstruction) -> bool:
    """Two reduce heroes may share one reduction fusion when they normalise alike."""
    return reduction_dimensions(a) == reduction_dimensions(b)


def reduction_emitter(hero: HloInstruction, smallest_input_bits: int, smallest_output_bits: int, *,
                      warp_size: int = WARP_SIZE, core_count: int = 132) -> ReductionEmitterKind:
    """The reduction emitter for a fusion with this reduce hero (CreateReductionFusion): a row
    reduction whose reduced size is a power of two that fits one warp of vectors is a multi-row
    reduction; a column reduction whose minor kept size divides the warp is a small-column one.
    `smallest_input_bits` may be None-like (a large number) for fusions without inputs."""
    dims = reduction_dimensions(hero)
    if not dims.is_row_reduction:
        minor_kept = dims.dimensions[2]
        if minor_kept and warp_size % minor_kept == 0:
            return ReductionEmitterKind.SMALL_COLUMN
        return ReductionEmitterKind.COLUMN
    if _multi_row_vector_size(dims, smallest_input_bits, smallest_output_bits, warp_size, core_count) is not None:
        return ReductionEmitterKind.MULTI_ROW
    return ReductionEmitterKind.ROW


def _multi_row_vector_size(dims: ReductionDimensions, smallest_input_bits: int, smallest_output_bits: int,
                           warp_size: int, core_count: int) -> int | None:
    """MultiRowReductionFusion::TryCreate's vector size, or None when that emitter does not apply."""
    minor = dims.dimensions[2]
    if minor <= 0 or minor & (minor - 1):
        return None
    smallest = min(smallest_input_bits, smallest_output_bits)
    largest = max(smallest_input_bits, smallest_output_bits)
    if largest >= 1 << 30:  # no inputs
        largest = smallest_output_bits
    vector = min(minor, 64 // max(smallest, 1))
    if largest >= 32:
        vector = min(128 // largest, vector)
    vector = max(vector, 1)
    if minor > warp_size * vector:
        return None

    def blocks(v: int) -> int:
        reduced_threads = max(minor // v, 1)
        kept = dims.dimensions[1]
        kept_threads = kept if kept * reduced_threads <= MULTI_ROW_THREADS_PER_BLOCK_TARGET \
            else max(MULTI_ROW_THREADS_PER_BLOCK_TARGET // reduced_threads, 1)
        return -(-kept // kept_threads)

    while vector > 1 and blocks(vector) < core_count:
        vector //= 2
    if minor > warp_size * vector:
        return None
    return vector
