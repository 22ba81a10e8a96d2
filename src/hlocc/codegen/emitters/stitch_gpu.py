"""The stitch emitter's GPU form (codegen/emitters/stitch.py has the CPU form and the plan): a row
of up to WARP_ROW_ELEMENTS elements is one warp's (up to WARP_ROWS_PER_BLOCK rows per block), a longer one
a block's, its threads striding the row as the reduction emitter's row schedule does (up to 512
threads, a multiple of the warp).

For each stage of reductions every thread folds its strided elements into its accumulators; the
warp combines them with `xla.shuffle_reduce`, a butterfly after which every lane holds the warp's
value. A warp's row is done there: no shared memory, no barrier (measured on an H200, a softmax
over [4096, 1024] f32 took 21 µs as a block of 512 threads per row, two elements per thread and
two barriers per row, against XLA's 7 µs). A block's row: lane 0 of each warp writes its value to
shared memory, and after the barrier EVERY thread folds the warps' values in the same order, so
that all threads hold the row's value (the next stage and the outputs read it at every element).
The outputs: each thread writes its strided elements of the row-shaped roots; the row's first
thread writes the per-row ones. Intermediates between the input and each use are recomputed from
the row in global memory (in L1/L2 after the first pass).

A runtime row length (`?n`: softmax over [?b, ?n], attention scores over a symbolic sequence, and
a lone row reduction over one: passes/stitch_fusion.py stitches both on the GPU) keeps the same
schedule with a runtime trip count: each thread runs `ceil((n - lane) / threads)` strides of its
row (`row_loop`: no element past the row's end is visited, so no guard per element), then the same
shuffles and shared memory, which stay at the kernel's top level. Which of the two forms a runtime
row gets is the kernel's version (runtime/speculation.py `block_row`, BladeDISC's row-reduction
speculation): a warp per row in the generic kernel, a block of MAX_ROW_THREADS per row in the
version `block_row if n >= WARP_ROW_ELEMENTS + 1` (`STITCH_BLOCK_ROW_MARKER` on its reduces), the
static rows' threshold: a warp's row up to 1024 elements was twice as fast as a block's on an H200.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import arith, scf, tensor
from xdsl.dialects.builtin import IndexType, TensorType
from xdsl.ir import Block, SSAValue

from hlocc.analysis.affine_expr import as_expr, dim, sym
from hlocc.analysis.indexing_map import IndexingMap, Variable, size_bound
from hlocc.analysis.interval import Interval
from hlocc.analysis.linearize import delinearize
from hlocc.analysis.simplifier import simplify_expr
from hlocc.codegen.elemental.element_emitter import ElementEmitter
from hlocc.codegen.elemental.storage import store_element
from hlocc.codegen.emitters.reduce_partials import apply_reducers, combiner_function, fold_elements
from hlocc.codegen.emitters.reduction import symbol_loop
from hlocc.codegen.emitters.reduction_tiling import MAX_ROW_THREADS, Tiling
from hlocc.codegen.ir import AllocateSharedOp, PredicatedInsertOp, ShuffleReduceOp, SyncThreadsOp
from hlocc.codegen.ir.size_ops import size_value
from hlocc.hlo.ir import HloComputation, HloInstruction
from hlocc.hlo.symbolic import DimExpr
from hlocc.hlo.symbolic import floordiv as sym_floordiv

WARP_ROW_ELEMENTS = 1024
"""The longest row one warp takes (32 elements a thread); a longer row is a block's."""
WARP_ROWS_PER_BLOCK = 8
STITCH_BLOCK_ROW_MARKER = "__hlocc_stitch_block_row"
"""In the backend config of each reduce of a GPU stitch kernel over a runtime row length that runs
a block per row (runtime/speculation.py `block_row`); without it such a kernel runs a warp per row."""


def is_block_row_marked(computation: HloComputation) -> bool:
    return any(i.opcode == "reduce" and STITCH_BLOCK_ROW_MARKER in str(i.attrs.get("backend_config") or "")
               for i in computation.instructions)


def gpu_tiling(rows: int | DimExpr, row_length: int | DimExpr, warp: int, block_row: bool = False) -> Tiling:
    """A warp per row of up to WARP_ROW_ELEMENTS, up to WARP_ROWS_PER_BLOCK rows per block; a block per
    longer row, threads (a multiple of the warp, at most 512) striding it. A runtime row count
    (`?b`) takes the most rows per block that divide it at every size: one for a bare `b`, eight
    under the launch version `b := 8*b_8` (runtime/speculation.py `warp_rows`). A runtime row
    length is a warp's, or with `block_row` (its `block_row` version) a block of 512 threads'."""
    if isinstance(row_length, DimExpr):
        warp_row = not block_row
    else:
        warp_row = row_length <= WARP_ROW_ELEMENTS and (isinstance(rows, DimExpr) or rows > 1)
    if warp_row:
        # Rows per block divide the rows: no spare warps, whose skipping would put the shuffles
        # under a branch (uniform per warp on a GPU, but not simulated on the host).
        per_block = max(d for d in range(1, WARP_ROWS_PER_BLOCK + 1) if _divides(d, rows))
        blocks = sym_floordiv(rows, per_block) if isinstance(rows, DimExpr) else rows // per_block
        return Tiling(True, warp * per_block, blocks, threads_per_row=warp, rows_per_block=per_block)
    threads = MAX_ROW_THREADS if isinstance(row_length, DimExpr) else \
        min(MAX_ROW_THREADS, -(-row_length // warp) * warp)
    return Tiling(True, threads, rows, threads_per_row=threads, rows_per_block=1)


def _divides(d: int, rows: int | DimExpr) -> bool:
    """Whether `d` divides `rows` at every size (each coefficient of a runtime count)."""
    return all(c % d == 0 for _, c in rows.terms) if isinstance(rows, DimExpr) else rows % d == 0


def strided_row_map(emitter, dims: tuple[Variable, Variable]) -> IndexingMap:
    """(th_x, bl_x)[s] -> the row shape's index of element s * threads + th_x of row bl_x (those
    past a static row's end excluded by a constraint; a runtime row's loop stops before them:
    `row_loop`)."""
    plan, threads = emitter.plan, emitter.tiling.threads_per_row
    n, shape = plan.row_length, plan.row_shape
    j = sym(0) * threads + _lane(emitter)
    symbols = (Variable(Interval(0, -(-size_bound(n) // threads) - 1), "s"),)
    # The row (block) delinearised over the kept dimensions in layout order; j along the row.
    kept_order = [d for d in shape.minor_to_major if d in plan.kept]
    kept = dict(zip(plan.kept, delinearize(emitter._row(), [shape.dims[d] for d in plan.kept],
                                           [plan.kept.index(d) for d in kept_order])))
    results = tuple(j if d == plan.row_dim else kept.get(d, 0) for d in range(shape.rank))
    m = IndexingMap(dims, tuple(as_expr(r) for r in results), symbols)
    m = IndexingMap(dims, tuple(simplify_expr(r, m.var_bounds) for r in m.results), symbols)
    if isinstance(n, DimExpr):
        return m
    return m.with_constraint(j, Interval(0, n - 1)) if m.expr_range(j).hi > n - 1 else m


def _lane(emitter):
    """The thread's position in its row (th_x, or th_x mod threads with several rows per block)."""
    return dim(0) if emitter.tiling.rows_per_block == 1 else dim(0) % emitter.tiling.threads_per_row


def row_loop(emitter, e: ElementEmitter, ids: Sequence[SSAValue], carried: list[SSAValue], step) -> list[SSAValue]:
    """The thread's strided walk of its row carrying `carried`: `step(row index, carried)` at each of
    its elements. A static row: the range variable's loop, the last stride's threads past the end
    guarded by the map's constraint. A runtime row length n: a loop of `ceil((n - lane) / threads)`
    trips, computed once, so every trip is inside the row (module doc)."""
    m = strided_row_map(emitter, emitter._dims())
    n = emitter.plan.row_length
    if not isinstance(n, DimExpr):
        return symbol_loop(e, m, ids, carried, lambda syms, values: step(e.apply(m, ids, syms), values))
    b, threads = e.b, emitter.tiling.threads_per_row
    (lane,) = e.apply(IndexingMap(emitter._dims()[:1], (_lane(emitter),)), [ids[0]])
    # (n + threads - 1 - lane) / threads: lane < threads, so the dividend is never negative
    room = b.add(arith.SubiOp(b.add(arith.AddiOp(size_value(b, n), b.index(threads - 1))), lane))
    trips = b.add(arith.DivUIOp(room, b.index(threads)))
    block = Block(arg_types=[IndexType(), *[v.type for v in carried]])
    with e.nested(block) as body:
        body.insert(scf.YieldOp(*step(e.apply(m, ids, [block.args[0]]), list(block.args[1:]))))
    return list(b.insert(scf.ForOp(b.index(0), trips, b.index(1), list(carried), block)).results)


def reduce_stage_gpu(emitter, e: ElementEmitter, ids: Sequence[SSAValue],
                     reduces: list[HloInstruction]) -> list[list[SSAValue]]:
    """Each reduce's values over the block's row, held by every thread (module doc)."""
    inits = [e.scalar(r.operand(len(r.operands) // 2 + k), []) for r in reduces
             for k in range(len(r.operands) // 2)]

    accs = row_loop(emitter, e, ids, inits, lambda index, accs: fold_elements(e, reduces, accs, index))
    types = [a.type for a in accs]
    b, warp, threads = e.b, emitter.target.warp_size, emitter.tiling.threads_per_row
    name = f"{emitter.name}_combiner_{len(emitter.combiners)}"
    emitter.combiners.append(combiner_function(name, reduces, types))
    accs = list(b.insert(ShuffleReduceOp(name, accs, min(threads, warp) // 2)).results)
    warps = -(-threads // warp)
    if warps == 1:  # a warp's row: every lane holds its value after the butterfly
        return _split(reduces, accs)
    lane, warp_id = e.apply(IndexingMap(emitter._dims()[:1], (dim(0) % warp, dim(0) // warp)), [ids[0]])
    is_lane0 = b.add(arith.CmpiOp(lane, b.index(0), "eq"))
    tiles = [b.add(AllocateSharedOp(TensorType(ty, [warps]))) for ty in types]
    tiles = [b.add(PredicatedInsertOp(is_lane0, a, tile, [warp_id])) for a, tile in zip(accs, tiles)]
    tiles = list(b.insert(SyncThreadsOp(tiles)).results)
    totals = [b.add(tensor.ExtractOp(tile, [b.index(0)], ty)) for tile, ty in zip(tiles, types)]
    for w in range(1, warps):
        totals = apply_reducers(b, reduces, totals, [b.add(tensor.ExtractOp(tile, [b.index(w)], ty))
                                                     for tile, ty in zip(tiles, types)], partials=True)
    return _split(reduces, totals)


def _split(reduces: list[HloInstruction], values: list[SSAValue]) -> list[list[SSAValue]]:
    """The flat values of `reduces` (a variadic reduce has several) as one list per reduce."""
    out, k = [], 0
    for r in reduces:
        n = len(r.operands) // 2
        out.append(values[k:k + n])
        k += n
    return out


def write_rows_gpu(emitter, e: ElementEmitter, ids: Sequence[SSAValue], outputs: list[SSAValue],
                   roots: list[int]) -> list[SSAValue]:
    """Each thread writes its strided elements of every row-shaped root."""
    def step(index: list[SSAValue], outs: list[SSAValue]) -> list[SSAValue]:
        outs = list(outs)
        for k in roots:
            root = emitter.roots[k]
            outs[k] = store_element(e.b, e.scalar(root, index), outs[k], root.shape, index)
        return outs

    return row_loop(emitter, e, ids, outputs, step)


def first_thread(emitter, e: ElementEmitter, ids: Sequence[SSAValue]) -> SSAValue:
    """i1: this is its row's first thread (the one that writes the per-row outputs)."""
    lane = ids[0]
    if emitter.tiling.rows_per_block > 1:
        (lane,) = e.apply(IndexingMap(emitter._dims()[:1], (dim(0) % emitter.tiling.threads_per_row,)), [ids[0]])
    return e.b.add(arith.CmpiOp(lane, e.b.index(0), "eq"))


__all__ = ["STITCH_BLOCK_ROW_MARKER", "first_thread", "gpu_tiling", "is_block_row_marked", "reduce_stage_gpu",
           "row_loop", "write_rows_gpu"]
