"""Elemental emission of reductions: each output element of a `reduce` or `reduce-window` computed
by a serial loop over its inputs (XLA's elemental_hlo_to_mlir EmitReduce / EmitReduceWindow).

This is how a reduction that is not a hero is emitted (a reduce inside a loop fusion, as in the
corpus's loop__tuple_nested), and the correct fallback for any reduction fusion whose dedicated
emitter is not built: one thread per output element, `scf.for` nests over the reduced dimensions
(or the window) carrying the accumulators, the reducer inlined on scalars. Registered into the
emitter base's index-op registry.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.dialects import scf
from xdsl.dialects.builtin import IndexType
from xdsl.ir import Block, SSAValue

from hlocc.analysis.op_indexing import output_to_input
from hlocc.codegen.builder import KernelBuilder
from hlocc.codegen.emitters.base import INDEX_OPS, ElementEmitter, emit_scalar_computation
from hlocc.hlo.ir import HloInstruction


def _loop_nest(e: ElementEmitter, sizes: Sequence[int], inits: list[SSAValue],
               body: Callable[[list[SSAValue], list[SSAValue]], list[SSAValue]]) -> list[SSAValue]:
    """scf.for nests over [0, size) for each size, carrying `inits`; body(ivs, accs) -> new accs.
    Values computed inside the nest are not reused outside it."""
    saved = e._values, e._maps

    def level(b: KernelBuilder, k: int, ivs: list[SSAValue], accs: list[SSAValue]) -> list[SSAValue]:
        if k == len(sizes):
            return body(ivs, accs)
        block = Block(arg_types=[IndexType(), *[a.type for a in accs]])
        with b.at(block):
            e._values, e._maps = dict(saved[0]), dict(saved[1])
            results = level(b, k + 1, [*ivs, block.args[0]], list(block.args[1:]))
            b.insert(scf.YieldOp(*results))
        loop = scf.ForOp(b.index(0), b.index(sizes[k]), b.index(1), accs, block)
        return list(b.insert(loop).results)

    try:
        return level(e.b, 0, [], inits)
    finally:
        e._values, e._maps = saved


def _emit_reduce(e: ElementEmitter, instr: HloInstruction, indices: list[SSAValue]) -> list[SSAValue]:
    n = len(instr.operands) // 2
    maps = output_to_input(instr)
    inits = [e.scalar(instr.operand(n + k), []) for k in range(n)]
    reduced = [instr.operand(0).shape.dims[d] for d in sorted(int(x) for x in instr.attrs["dimensions"])]

    def body(ivs: list[SSAValue], accs: list[SSAValue]) -> list[SSAValue]:
        values = [e.scalar(instr.operand(k), e.apply(maps[k], indices, ivs)) for k in range(n)]
        return emit_scalar_computation(e.b, instr.to_apply, [*accs, *values])

    return _loop_nest(e, reduced, inits, body)


def _emit_reduce_window(e: ElementEmitter, instr: HloInstruction, indices: list[SSAValue]) -> list[SSAValue]:
    n = len(instr.operands) // 2
    maps = output_to_input(instr)
    inits = [e.scalar(instr.operand(n + k), []) for k in range(n)]
    window = [len(range(v.bounds.lo, v.bounds.hi + 1)) for v in maps[0].symbols]
    full = instr.operand(0).shape.dims

    def body(ivs: list[SSAValue], accs: list[SSAValue]) -> list[SSAValue]:
        # Window positions in padding (or between dilated elements) are skipped, as XLA:CPU does.
        inside = _window_check(e, maps[0], indices, ivs, full)
        values_fn = lambda: emit_scalar_computation(  # noqa: E731
            e.b, instr.to_apply, [*accs, *[e.scalar(instr.operand(k), e.apply(maps[k], indices, ivs))
                                         for k in range(n)]])
        if inside is None:
            return values_fn()
        return _if_else_many(e, inside, values_fn, lambda: list(accs), [a.type for a in accs])

    return _loop_nest(e, window, inits, body)


def _window_check(e: ElementEmitter, m, indices, ivs, full_sizes) -> SSAValue | None:
    """True where the operand index the map gives lies inside the operand (and the constraints hold)."""
    from hlocc.analysis.indexing_map import IndexingMap
    from hlocc.analysis.interval import Interval

    results = e.apply(IndexingMap(m.dims, m.results, m.symbols, m.runtime), indices, ivs)
    values, intervals = [], []
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


def _if_else_many(e: ElementEmitter, cond: SSAValue, then_fn, else_fn, types) -> list[SSAValue]:
    from xdsl.ir import Region

    saved = e._values, e._maps
    blocks = []
    for fn in (then_fn, else_fn):
        block = Block()
        e._values, e._maps = dict(saved[0]), dict(saved[1])
        with e.b.at(block):
            e.b.insert(scf.YieldOp(*fn()))
        blocks.append(block)
    e._values, e._maps = saved
    op = scf.IfOp(cond, list(types), Region(blocks[0]), Region(blocks[1]))
    return list(e.b.insert(op).results)


INDEX_OPS["reduce"] = _emit_reduce
INDEX_OPS["reduce-window"] = _emit_reduce_window
