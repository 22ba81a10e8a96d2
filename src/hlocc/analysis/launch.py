"""Launch-grid indexing: which output element each (thread, block, vector, unroll) position writes.

The loop emitter covers an output of N elements with a 1-D grid of `blocks` blocks of
`threads_per_block` threads. Every thread handles `unroll` consecutive vectors of `vector_size`
consecutive elements, so with

    linear = (bl_x * threads_per_block + th_x) * (unroll * vector_size)
             + unroll_index * vector_size + vector_index

the element written is `linear` delinearised in the minor-to-major order of the output layout
(row-major by default). When the grid holds more than N positions (a partial last block), the map
carries the constraint `linear in [0, N-1]`. The map is simplified, so a symbol of size 1 (no
vectorization or no unrolling) disappears, as in XLA's maps.

With symbolic dims (dynamic shapes) N and the block count are `DimExpr`s evaluated per launch
(`blocks` is then `ceildiv(N, threads * unroll * vector_size)`, at least 1 at run time), the
delinearisation divides by `$size` atoms, and the map has no bound constraint: the emitter guards
the grid's tail itself (emitters/loop.py: whole vectors, then a checked remainder).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from hlocc.analysis.affine_expr import IndexingError, as_expr, dim, size_expr, sym
from hlocc.analysis.indexing_map import IndexingMap, Variable, size_bound
from hlocc.analysis.interval import Interval
from hlocc.analysis.linearize import delinearize
from hlocc.analysis.simplifier import Simplifier
from hlocc.hlo.symbolic import DimExpr
from hlocc.hlo.symbolic import floordiv as sym_floordiv


@dataclass(frozen=True)
class LaunchDims:
    threads_per_block: int
    blocks: int | DimExpr  # symbolic for a kernel with runtime dims: `at(binding)` gives the count

    @property
    def max_blocks(self) -> int:
        """The block count, or the bound of a symbolic one (the range of the block id)."""
        return size_bound(self.blocks)

    def at(self, binding: Mapping[str, int]) -> LaunchDims:
        """The launch at concrete sizes (itself when static; at least one block)."""
        if not isinstance(self.blocks, DimExpr):
            return self
        return LaunchDims(self.threads_per_block, max(1, self.blocks.evaluate(binding)))

    @property
    def num_threads(self) -> int:
        return self.threads_per_block * self.blocks


def loop_launch_dims(num_elements: int, threads_per_block: int, vector_size: int = 1, unroll: int = 1) -> LaunchDims:
    """Enough blocks for every element: ceil(N / (threads * unroll * vector_size)), at least 1."""
    per_block = threads_per_block * unroll * vector_size
    if isinstance(num_elements, DimExpr):
        return LaunchDims(threads_per_block, sym_floordiv(num_elements + (per_block - 1), per_block))
    return LaunchDims(threads_per_block, max(1, -(-num_elements // per_block)))


def loop_launch_map(dims: Sequence[int], launch: LaunchDims, vector_size: int = 1, unroll: int = 1,
                    minor_to_major: Sequence[int] | None = None) -> IndexingMap:
    """(th_x, bl_x)[vector_index, unroll_index] -> output index, simplified (see module doc)."""
    if vector_size < 1 or unroll < 1:
        raise IndexingError(f"vector size {vector_size} and unroll {unroll} must be positive")
    num_elements = 1
    for d in dims:
        num_elements *= d
    per_thread = unroll * vector_size
    linear = (dim(1) * launch.threads_per_block + dim(0)) * per_thread + sym(1) * vector_size + sym(0)
    m = IndexingMap(
        (Variable(Interval(0, launch.threads_per_block - 1), "th_x"),
         Variable(Interval(0, launch.max_blocks - 1), "bl_x")),
        tuple(delinearize(linear, dims, minor_to_major)),
        (Variable(Interval(0, vector_size - 1), "vector_index"), Variable(Interval(0, unroll - 1), "unroll_index")),
    )
    if not isinstance(num_elements, DimExpr) and launch.num_threads * per_thread > num_elements:
        m = m.with_constraint(linear, Interval(0, num_elements - 1))
    return m.simplify()


@dataclass(frozen=True)
class SymbolicGrid:
    """The launch of a loop over an output with symbolic dims: `map` (th_x, bl_x)[vector_index] ->
    output index, without constraints; a thread's whole vector is inside the output when every
    `room` expression (over th_x, bl_x) is >= 0, and one element is inside when every `inside`
    expression (over all three) is >= 1. `whole_vectors`: no vector is ever partial (the vectored
    size is a multiple of the vector: a thread is all inside or all outside, `room` decides)."""

    launch: LaunchDims
    map: IndexingMap
    room: tuple
    inside: tuple
    whole_vectors: bool = False


def _multiple_of(size: int | DimExpr, k: int) -> bool:
    """Whether `size` is a multiple of `k` at every binding (each coefficient is)."""
    if not isinstance(size, DimExpr):
        return size % k == 0
    return all(c % k == 0 for _, c in size.terms)


def symbolic_loop_grid(dims: Sequence[int | DimExpr], threads_per_block: int, vector_size: int,
                       minor_to_major: Sequence[int] | None = None, tile_rows: int = 0,
                       rows: bool = False) -> SymbolicGrid:
    """The grid of a loop over `dims` (some symbolic), `vector_size` consecutive elements per thread.

    With `tile_rows` (a fusion that transposes the minor dimension: `tiled_symbolic_grid`), the two
    minor-most dims are covered in tiles of `tile_rows` rows x `vector_size` columns, consecutive
    threads taking the rows of one tile.

    When the physical minor-most dim is symbolic, a thread takes `vector_size` consecutive elements
    of one row (the row is split into `ceildiv(n, vector)` chunks, the last one partial): the
    division by runtime sizes then happens once per thread, on its thread number, never per element
    (dividing the element's linear position by $n made a [257, 4096] broadcast 12x slower than
    static). With `rows`, a static minor-most dim is split into chunks the same way (the loop
    emitter's row grid, for reads that a vector straddling two rows would gather: emitters/loop.py);
    every size may then be static, and the grid's sizes are ints. Otherwise the elements are
    numbered linearly as in `loop_launch_map`."""
    rank = len(dims)
    order = list(minor_to_major) if minor_to_major is not None else list(range(rank - 1, -1, -1))
    if tile_rows > 1 and rank >= 2 and vector_size > 1:
        return tiled_symbolic_grid(dims, threads_per_block, vector_size, order, tile_rows)
    thread = dim(1) * threads_per_block + dim(0)
    lane = sym(0) if vector_size > 1 else 0
    minor = order[0] if order else None
    whole = False
    if minor is not None and vector_size > 1 and (rows or isinstance(dims[minor], DimExpr)):
        n = dims[minor]
        # n a multiple of the vector (a speculated version, runtime/speculation.py): no partial
        # chunk, and the chunk count is n / vector exactly, without a rounding division.
        whole = _multiple_of(n, vector_size)
        chunks = sym_floordiv(n if whole else n + (vector_size - 1), vector_size)
        grid_dims = [chunks if d == minor else dims[d] for d in range(rank)]
        index = delinearize(thread, grid_dims, order)
        column = index[minor] * vector_size
        index[minor] = column + lane
        total = 1
        for d in grid_dims:
            total = total * d
        room = (size_expr(n) - column - vector_size, size_expr(total) - 1 - thread)
        inside = (size_expr(n) - index[minor], size_expr(total) - thread)
        if whole:
            room, inside = room[1:], inside[1:]
    else:
        total = 1
        for d in dims:
            total = total * d
        whole = _multiple_of(total, vector_size)
        start = thread * vector_size
        index = delinearize(start + lane, dims, order)
        room = (size_expr(total) - start - vector_size,)
        inside = (size_expr(total) - start - lane,)
        total = sym_floordiv(total + (vector_size - 1), vector_size)
    return _grid(index, room, inside, whole, total, threads_per_block, vector_size)


def tiled_symbolic_grid(dims: Sequence[int | DimExpr], threads_per_block: int, vector_size: int,
                        order: Sequence[int], tile_rows: int) -> SymbolicGrid:
    """`symbolic_loop_grid` in tiles of the two minor-most dims (r, c): a thread writes `vector_size`
    consecutive elements of one row of its tile, the tile's `tile_rows` rows going to consecutive
    threads, then the tiles along c, along r, and the outer dims. Where the fusion reads its input
    transposed (its minor dim along r), a tile's rows read the same `vector_size` input rows, each
    a cache line used whole, instead of one element of each of n rows per output row: row by row,
    a [1024, b] transpose of x[b, 1024] at b = 1024 took 10 ms against 0.3 ms at b = 256, the
    4 KiB-strided rows it read thrashing the caches' sets. Divisions by runtime sizes stay once per
    thread, on its number."""
    c, r, outer = order[0], order[1], list(order[2:])
    n_c, n_r = dims[c], dims[r]
    thread = dim(1) * threads_per_block + dim(0)
    lane = sym(0)
    whole_c = _multiple_of(n_c, vector_size)
    chunks = sym_floordiv(n_c if whole_c else n_c + (vector_size - 1), vector_size) if isinstance(n_c, DimExpr) \
        else -(-n_c // vector_size)
    tiles = sym_floordiv(n_r + (tile_rows - 1), tile_rows) if isinstance(n_r, DimExpr) else -(-n_r // tile_rows)
    grid = [tile_rows, chunks, tiles, *(dims[d] for d in outer)]
    parts = delinearize(thread, grid, list(range(len(grid))))
    index: list = [0] * len(dims)
    index[c] = parts[1] * vector_size + lane
    index[r] = parts[2] * tile_rows + parts[0]
    for d, e in zip(outer, parts[3:]):
        index[d] = e
    total = 1
    for g in grid:
        total = total * g
    column = parts[1] * vector_size
    room = [size_expr(n_r) - 1 - index[r], size_expr(total) - 1 - thread]
    inside = [size_expr(n_r) - index[r], size_expr(total) - thread]
    if not whole_c:
        room.insert(0, size_expr(n_c) - column - vector_size)
        inside.insert(0, size_expr(n_c) - index[c])
    return _grid(index, tuple(room), tuple(inside), False, total, threads_per_block, vector_size)


def _grid(index: list, room: tuple, inside: tuple, whole: bool, total, threads_per_block: int,
          vector_size: int) -> SymbolicGrid:
    blocks = sym_floordiv(total + (threads_per_block - 1), threads_per_block)
    launch = LaunchDims(threads_per_block, blocks)
    m = IndexingMap(
        (Variable(Interval(0, threads_per_block - 1), "th_x"), Variable(Interval(0, launch.max_blocks - 1), "bl_x")),
        tuple(as_expr(e) for e in index),
        (Variable(Interval(0, vector_size - 1), "vector_index"),) if vector_size > 1 else ())
    # Only the results are simplified: `room` and `inside` are over the same variables, so none may
    # be dropped or renumbered (`IndexingMap.simplify` removes a vector lane that no result uses,
    # as in a scalar output's empty index, while `inside` still reads it as s0).
    simplifier = Simplifier(m.var_bounds)
    m = replace(m, results=tuple(simplifier.simplify(e) for e in m.results))
    return SymbolicGrid(launch, m, room, inside, whole)
