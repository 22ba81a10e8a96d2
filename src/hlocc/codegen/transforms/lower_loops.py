"""`lower-xla-loops-to-scf`: `xla.loop` → nested `scf.for` over its range variables, with the
body under an `scf.if` when the map has constraints (seed 000 "xla_gpu to scf conversion"; XLA's
lower_xla_loops_to_scf.cc). The map's results are computed by `xla.apply_indexing` inside the
guard. Iterations outside the domain yield the iter_args unchanged.

The predicated element accesses become branches here too, while the tensors are still shaped:
`xla.predicated_insert v into t[i] if c` is `scf.if c { tensor.insert } else { t }` and
`xla.predicated_extract t[i] if c else f` is `scf.if c { tensor.extract } else { f }` (the
extract never runs when the predicate is false, so its indices may be out of bounds then).

The checks of the dimensions' own bounds (thread and block ids against their ranges), which the
seed's example still shows, are not emitted: the ids are in range by construction, and XLA's
`xla-simplify-arith` removes them in the next step anyway.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import scf, tensor
from xdsl.dialects.builtin import IndexType, ModuleOp
from xdsl.ir import Block, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from hlocc.analysis.indexing_map import IndexingMap
from hlocc.codegen.ir import ApplyIndexingOp, LoopOp, PredicatedExtractOp, PredicatedInsertOp
from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.transforms.util import if_then, move_block_body, walk_ops


def emit_constraint_check(b: KernelBuilder, m: IndexingMap, operands: list[SSAValue]) -> SSAValue | None:
    """An i1 that holds where all of the map's constraints hold (None when it has none)."""
    if not m.constraints:
        return None
    exprs = tuple(e for e, _ in m.constraints)
    values = b.insert(ApplyIndexingOp(IndexingMap(m.dims, exprs, m.symbols, m.runtime), operands)).results
    return b.in_intervals(values, [iv for _, iv in m.constraints])


def _keep_names(old: Sequence[SSAValue], new: Sequence[SSAValue]) -> None:
    """The loop's block arguments' names (%dim0, %iter, ...) for the values that replace them."""
    for o, n in zip(old, new):
        n.name_hint = o.name_hint or n.name_hint


def _lower(loop: LoopOp) -> None:
    m = loop.map
    dims = list(loop.dims[:len(m.dims)])
    runtime = list(loop.dims[len(m.dims):])
    body_block = loop.body.block
    result_types = [r.type for r in loop.results_]

    def emit_body(b: KernelBuilder, ivs: list[SSAValue], iter_args: list[SSAValue]) -> list[SSAValue]:
        operands = [*dims, *ivs, *runtime]
        check = emit_constraint_check(b, m, operands)

        def compute(inner: KernelBuilder) -> list[SSAValue]:
            index = list(inner.insert(ApplyIndexingOp(IndexingMap(m.dims, m.results, m.symbols, m.runtime),
                                                      operands)).results) if m.results else []
            _keep_names(loop.map_results, index)
            # emitted once (the innermost level) and the loop is erased: move the body, not a copy
            return move_block_body(body_block, [*ivs, *index, *iter_args], inner.insertion_point)

        return if_then(b, check, compute, iter_args)

    def nest(b: KernelBuilder, level: int, ivs: list[SSAValue], iter_args: list[SSAValue]) -> list[SSAValue]:
        if level == len(m.symbols):
            return emit_body(b, ivs, iter_args)
        bounds = m.symbols[level].bounds
        block = Block(arg_types=[IndexType(), *result_types])
        inner = KernelBuilder(block)
        inner.insert(scf.YieldOp(*nest(inner, level + 1, [*ivs, block.args[0]], list(block.args[1:]))))
        for_op = scf.ForOp(b.index(bounds.lo), b.index(bounds.hi + 1), b.index(1), iter_args, block)
        block.args[0].name_hint = loop.induction_vars[level].name_hint or m.symbols[level].name or None
        _keep_names(loop.region_iter_args, block.args[1:])
        return list(b.insert(for_op).results)

    b = KernelBuilder(InsertPoint.before(loop))
    results = nest(b, 0, [], list(loop.inits))
    for old, new in zip(loop.results_, results):
        old.replace_all_uses_with(new)
    Rewriter.erase_op(loop)


@dataclass(frozen=True)
class LowerLoopsToScfPass(ModulePass):
    name = "lower-xla-loops-to-scf"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for loop in walk_ops(op, LoopOp):
            _lower(loop)
        for o in walk_ops(op, (PredicatedInsertOp, PredicatedExtractOp)):
            _lower_predicated(o)


def _lower_predicated(op: PredicatedInsertOp | PredicatedExtractOp) -> None:
    then_block, else_block = Block(), Block()
    then_b = KernelBuilder(then_block)
    if isinstance(op, PredicatedInsertOp):
        then_b.insert(scf.YieldOp(then_b.add(tensor.InsertOp(op.value, op.dest, list(op.indices)))))
        KernelBuilder(else_block).insert(scf.YieldOp(op.dest))
    else:
        then_b.insert(scf.YieldOp(then_b.add(tensor.ExtractOp(op.src, list(op.indices), op.result.type))))
        KernelBuilder(else_block).insert(scf.YieldOp(op.fallback))
    Rewriter.replace_op(op, scf.IfOp(op.condition, [op.result.type], Region(then_block), Region(else_block)))
