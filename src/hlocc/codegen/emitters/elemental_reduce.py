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
    return _bounded_loop_nest(e, [(e.b.index(0), size_value(e.b, size)) for size in sizes], inits, body)


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
    if _is_symbolic_window(instr):
        return _emit_symbolic_reduce_window(e, instr, indices)
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


def _is_symbolic_window(instr: HloInstruction) -> bool:
    window = instr.attrs.get("window", ())
    return any(isinstance(x, DimExpr) for x in instr.operand(0).shape.dims) or any(
        isinstance(x, DimExpr) for w in window for x in (w.size, w.pad_lo, w.pad_hi))


def _emit_symbolic_reduce_window(e: ElementEmitter, instr: HloInstruction, indices: list[SSAValue]) -> list[SSAValue]:
    """A reduce-window over runtime sizes (a window of `?b`, JAX's cumsum over a symbolic axis;
    XLA's ReduceWindow semantics): the window position `s` of output index `d` reads the operand at
    `p = d*stride + s*rhs_dilate - pad_lo`, where `0 <= p <= (n-1)*lhs_dilate` and `p` is a multiple
    of lhs_dilate; other positions are padding and skipped. Undilated dimensions loop over exactly
    the positions inside the operand, `s` in `[max(0, -q), min(w, n - q))` with `q = d*stride -
    pad_lo` (computed per element from the runtime sizes: a cumsum's row reads only its prefix), so
    no position needs a check; dilated ones loop over the whole window and check each."""
    n = len(instr.operands) // 2
    b = e.b
    inits = [e.scalar(instr.operand(n + k), []) for k in range(n)]
    sizes = instr.operand(0).shape.dims
    bases, bounds, checked = [], [], []
    for d, (w, size) in zip(indices, zip(instr.attrs["window"], sizes)):
        scaled = d if w.stride == 1 else b.add(arith.MuliOp(d, b.index(w.stride)))
        base = scaled if _is_zero(w.pad_lo) else b.add(arith.SubiOp(scaled, size_value(b, w.pad_lo)))
        bases.append(base)
        dilated = w.lhs_dilate != 1 or w.rhs_dilate != 1
        checked.append(dilated)
        if dilated:
            bounds.append((b.index(0), size_value(b, w.size)))
        else:
            lo = b.op(arith.MaxSIOp, b.add(arith.SubiOp(b.index(0), base)), b.index(0))
            hi = b.op(arith.MinSIOp, size_value(b, w.size), b.add(arith.SubiOp(size_value(b, size), base)))
            bounds.append((lo, hi))

    def body(ivs: list[SSAValue], accs: list[SSAValue]) -> list[SSAValue]:
        positions, checks = [], []
        for iv, base, w, size, dilated in zip(ivs, bases, instr.attrs["window"], sizes, checked):
            step = iv if w.rhs_dilate == 1 else e.b.add(arith.MuliOp(iv, e.b.index(w.rhs_dilate)))
            position = e.b.add(arith.AddiOp(base, step))
            if not dilated:
                positions.append(position)
                continue
            last = e.b.add(arith.MuliOp(e.b.add(arith.SubiOp(size_value(e.b, size), e.b.index(1))),
                                        e.b.index(w.lhs_dilate)))
            checks += [e.b.cmpi("sge", position, e.b.index(0)), e.b.cmpi("sle", position, last)]
            if w.lhs_dilate != 1:
                checks.append(e.b.cmpi("eq", e.b.op(arith.RemSIOp, position, e.b.index(w.lhs_dilate)), e.b.index(0)))
                position = e.b.op(arith.DivSIOp, position, e.b.index(w.lhs_dilate))
            positions.append(position)

        def combine() -> list[SSAValue]:
            values = [e.scalar(instr.operand(k), positions) for k in range(n)]
            return emit_scalar_computation(e.b, instr.to_apply, [*accs, *values])
        return e.if_else_many(e.b.and_(checks), combine, lambda: list(accs), [a.type for a in accs])

    return _bounded_loop_nest(e, bounds, inits, body)


def _is_zero(size) -> bool:
    return not isinstance(size, DimExpr) and size == 0


def _bounded_loop_nest(e: ElementEmitter, bounds: Sequence[tuple[SSAValue, SSAValue]], inits: list[SSAValue],
                       body: Callable[[list[SSAValue], list[SSAValue]], list[SSAValue]]) -> list[SSAValue]:
    """scf.for nests over `[lo, hi)` per level (empty where hi <= lo), carrying `inits`; body(ivs,
    accs) -> new accs. Values computed inside the nest are not reused outside it."""
    def level(k: int, ivs: list[SSAValue], accs: list[SSAValue]) -> list[SSAValue]:
        if k == len(bounds):
            return body(ivs, accs)
        block = Block(arg_types=[IndexType(), *[a.type for a in accs]])
        with e.nested(block) as b:
            b.insert(scf.YieldOp(*level(k + 1, [*ivs, block.args[0]], list(block.args[1:]))))
        loop = scf.ForOp(bounds[k][0], bounds[k][1], e.b.index(1), accs, block)
        return list(e.b.insert(loop).results)

    return level(0, [], inits)


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
