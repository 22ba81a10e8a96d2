"""Elemental emission of reductions: each output element of a `reduce` or `reduce-window` computed
by a serial loop over its inputs (XLA's elemental_hlo_to_mlir EmitReduce / EmitReduceWindow).

This is how a reduction that is not a hero is emitted (a reduce inside a loop fusion, as in the
corpus's loop__tuple_nested), and the correct fallback for any reduction fusion whose dedicated
emitter is not built: one thread per output element, `scf.for` nests over the reduced dimensions
(or the window) carrying the accumulators, the reducer inlined on scalars. A float reduce whose
contiguous (minor-most) dimension is reduced walks that dimension innermost with a vector of
partial accumulators instead (`reduce_partials.py`: XLA's reassociation, which SIMD needs).
Registered into the emitter base's index-op registry.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IndexType
from xdsl.ir import Block, SSAValue

from hlocc.analysis.op_indexing import output_to_input
from hlocc.codegen.elemental.element_emitter import ElementEmitter
from hlocc.codegen.elemental.index_ops import emit_scalar_computation
from hlocc.codegen.elemental.registry import INDEX_OPS
from hlocc.codegen.emitters.reduce_partials import emit_row_partials, plan_partials
from hlocc.codegen.ir.size_ops import size_value
from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.symbolic import Dim, DimExpr


def _loop_nest(e: ElementEmitter, sizes: Sequence[Dim], inits: list[SSAValue],
               body: Callable[[list[SSAValue], list[SSAValue]], list[SSAValue]]) -> list[SSAValue]:
    """scf.for nests over [0, size) for each size, carrying `inits`; body(ivs, accs) -> new accs.
    Values computed inside the nest are not reused outside it."""
    def level(k: int, ivs: list[SSAValue], accs: list[SSAValue]) -> list[SSAValue]:
        if k == len(sizes):
            return body(ivs, accs)
        block = Block(arg_types=[IndexType(), *[a.type for a in accs]])
        with e.nested(block) as b:
            b.insert(scf.YieldOp(*level(k + 1, [*ivs, block.args[0]], list(block.args[1:]))))
        loop = scf.ForOp(e.b.index(0), size_value(e.b, sizes[k]), e.b.index(1), accs, block)
        return list(e.b.insert(loop).results)

    return level(0, [], inits)


def _emit_reduce(e: ElementEmitter, instr: HloInstruction, indices: list[SSAValue]) -> list[SSAValue]:
    n = len(instr.operands) // 2
    maps = output_to_input(instr)
    inits = [e.scalar(instr.operand(n + k), []) for k in range(n)]
    # One loop per symbol of the input maps: a reduced dimension of size 1 has none (it simplified away).
    reduced = reduced_sizes(instr, maps[0])
    plan = plan_partials(instr, maps[0])
    if plan is not None:
        # The contiguous reduced dimension with partial accumulators, innermost; the other reduced
        # dimensions are serial loops around it, each row folded into their accumulators.
        outer = [k for k in range(len(reduced)) if k != plan.symbol]

        def row(ivs: list[SSAValue], accs: list[SSAValue]) -> list[SSAValue]:
            symbols: list[SSAValue | None] = [None] * len(reduced)
            for k, iv in zip(outer, ivs):
                symbols[k] = iv
            partials, _ = emit_row_partials(e, instr, maps, indices, symbols, plan, inits, overlap_tail=True)
            return emit_scalar_computation(e.b, instr.to_apply, [*accs, *partials])

        return _loop_nest(e, [reduced[k] for k in outer], inits, row)

    def body(ivs: list[SSAValue], accs: list[SSAValue]) -> list[SSAValue]:
        values = [e.scalar(instr.operand(k), e.apply(maps[k], indices, ivs)) for k in range(n)]
        return emit_scalar_computation(e.b, instr.to_apply, [*accs, *values])

    return _loop_nest(e, reduced, inits, body)


def reduced_sizes(instr: HloInstruction, m) -> list[Dim]:
    """The trip count of each range variable of a reduce's operand map: its size, read at run time
    for a symbolic dimension (whose variable's bounds are only SIZE_BOUND)."""
    dims = instr.operand(0).shape.dims
    symbolic = [dims[d] for d in sorted(instr.attrs["dimensions"]) if dims[d] != 1]
    if any(isinstance(d, DimExpr) for d in symbolic) and len(symbolic) == len(m.symbols):
        return symbolic
    return [v.bounds.hi - v.bounds.lo + 1 for v in m.symbols]


def _emit_reduce_window(e: ElementEmitter, instr: HloInstruction, indices: list[SSAValue]) -> list[SSAValue]:
    n = len(instr.operands) // 2
    maps = output_to_input(instr)
    inits = [e.scalar(instr.operand(n + k), []) for k in range(n)]
    window = [v.bounds.hi - v.bounds.lo + 1 for v in maps[0].symbols]
    lows = [v.bounds.lo for v in maps[0].symbols]  # the simplifier may start a window past its padding
    full = instr.operand(0).shape.dims

    def body(ivs: list[SSAValue], accs: list[SSAValue]) -> list[SSAValue]:
        ivs = [iv if lo == 0 else e.b.add(arith.AddiOp(iv, e.b.index(lo))) for iv, lo in zip(ivs, lows)]
        # Window positions in padding (or between dilated elements) are skipped, as XLA:CPU does.
        inside = _window_check(e, maps[0], indices, ivs, full, instr.shape.dims)
        values_fn = lambda: emit_scalar_computation(  # noqa: E731
            e.b, instr.to_apply, [*accs, *[e.scalar(instr.operand(k), e.apply(maps[k], indices, ivs))
                                         for k in range(n)]])
        if inside is None:
            return values_fn()
        return e.if_else_many(inside, values_fn, lambda: list(accs), [a.type for a in accs])

    return _loop_nest(e, window, inits, body)


def _window_check(e: ElementEmitter, m, indices, ivs, full_sizes, out_sizes) -> SSAValue | None:
    """True where the operand index the map gives lies inside the operand (and the constraints hold,
    and the output index lies in the map's domain: the simplifier narrows an output dimension whose
    other positions see only padding, e.g. `d2 in [1, 1]` for a size-1 operand dimension padded low)."""
    from hlocc.analysis.indexing_map import IndexingMap
    from hlocc.analysis.interval import Interval

    results = e.apply(IndexingMap(m.dims, m.results, m.symbols, m.runtime), indices, ivs)
    values, intervals = [], []
    for index, dim, size in zip(indices, m.dims, out_sizes):
        if dim.bounds.lo > 0 or dim.bounds.hi < size - 1:
            values.append(index)
            intervals.append(Interval(dim.bounds.lo, dim.bounds.hi))
    for v, size, r in zip(results, full_sizes, m.results):
        iv = m.expr_range(r)
        if iv.lo < 0 or iv.hi > size - 1:  # the window can leave the operand: padding
            values.append(v)
            intervals.append(Interval(0, size - 1))
    if m.constraints:
        exprs = tuple(c for c, _ in m.constraints)
        values += e.apply(IndexingMap(m.dims, exprs, m.symbols, m.runtime), indices, ivs)
        intervals += [iv for _, iv in m.constraints]
    return e.b.in_intervals(values, intervals)


INDEX_OPS["reduce"] = _emit_reduce
INDEX_OPS["reduce-window"] = _emit_reduce_window
