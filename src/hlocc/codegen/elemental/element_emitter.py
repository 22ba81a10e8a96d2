"""`ElementEmitter`: emits the value of the instructions of one partitioned computation at given
logical indices, into one function body (XLA's elemental_hlo_to_mlir ProvideParameter/EmitElement):
index ops through `INDEX_OPS`, elementwise ops through `ELEMENTAL`, other subgraphs by `pure_call`."""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from xdsl.dialects import scf
from xdsl.ir import Block, Region, SSAValue

from hlocc.analysis.affine_expr import Expr, dim
from hlocc.analysis.indexing_map import IndexingMap, Variable, size_bound
from hlocc.analysis.interval import Interval
from hlocc.analysis.op_indexing import output_to_input
from hlocc.codegen.elemental.registry import ELEMENTAL, INDEX_OPS, emit_elementwise
from hlocc.codegen.ir import ApplyIndexingOp, PureCallOp
from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.ir.mlir_types import element_type
from hlocc.codegen.partitioner import PartitionedComputation, Subgraph
from hlocc.errors import UnsupportedError
from hlocc.hlo.ir import HloInstruction


@contextmanager
def deep_recursion(limit: int = 20000):
    """Emission recurses along operand chains (a subgraph holds at most 2000 instructions)."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, limit))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)



@functools.cache
def _identity_results(n: int) -> tuple[Expr, ...]:
    """(d0, ..., d{n-1}): an identity map's results, built once per rank (`apply` asks per use)."""
    return tuple(dim(i) for i in range(n))

@dataclass
class _Frame:
    """What a function being emitted provides: its parameter tensors."""

    params: list[SSAValue]


class ElementEmitter:
    """Emits the value of instructions of one partitioned computation at given logical indices, into
    one function body. Values are memoised by (instruction, index values), index computations by
    (map, operands)."""

    def __init__(self, b: KernelBuilder, partitioned: PartitionedComputation, subgraph: Subgraph | None,
                 params: list[SSAValue]):
        self.b = b
        self.partitioned = partitioned
        self.subgraph = subgraph
        self.params = params
        self._values: dict[tuple, list[SSAValue]] = {}
        self._maps: dict[tuple, list[SSAValue]] = {}
        self.overrides: dict[int, list[SSAValue]] = {}
        """id(instruction) -> its values, whatever the indices: a hero-based emitter injects a hero's
        value (e.g. a transpose read from shared memory) so that an epilogue is computed from it."""

    # -- indexing -------------------------------------------------------------------------------------
    def apply(self, m: IndexingMap, dims: Sequence[SSAValue], symbols: Sequence[SSAValue] = (),
              runtime: Sequence[SSAValue] = ()) -> list[SSAValue]:
        """The map's results (its constraints are not checked; see `in_bounds`)."""
        if not m.results:
            return []
        if (not symbols and not runtime and len(m.results) == len(dims) == len(m.dims)
                and tuple(m.results) == _identity_results(len(dims))):
            return list(dims)  # the identity (every elementwise use): nothing to compute
        m = IndexingMap(m.dims, m.results, m.symbols, m.runtime)  # constraints dropped
        operands = [*dims, *symbols, *runtime]
        key = (m, tuple(id(v) for v in operands))
        cached = self._maps.get(key)
        if cached is None:
            op = ApplyIndexingOp(m, operands)
            self.b.insert(op)
            cached = self._maps[key] = list(op.results)
        return cached

    def in_bounds(self, m: IndexingMap, dims: Sequence[SSAValue], full_sizes: Sequence[int],
                  symbols: Sequence[SSAValue] = (), runtime: Sequence[SSAValue] = ()) -> SSAValue | None:
        """An i1 that is true where the map's domain holds: its constraints, and the bounds of
        dimensions narrower than the indexed shape (`full_sizes`). None when nothing restricts it."""
        exprs, intervals = [], []
        for i, (v, size) in enumerate(zip(m.dims, full_sizes)):
            if v.bounds.lo > 0 or v.bounds.hi < size_bound(size) - 1:  # (a symbolic size: its bound)
                exprs.append(dim(i))
                intervals.append(v.bounds)
        for e, iv in m.constraints:
            exprs.append(e)
            intervals.append(iv)
        if not exprs:
            return None
        unbounded = IndexingMap(tuple(Variable(Interval(0, size_bound(n) - 1), v.name)
                                      for v, n in zip(m.dims, full_sizes)),
                                tuple(exprs), m.symbols, m.runtime)
        values = self.apply(unbounded, dims, symbols, runtime) if any(e != dim(i) for i, e in enumerate(exprs)) \
            else [dims[e.index] for e in exprs]
        return self.b.in_intervals(values, intervals)

    # -- values ---------------------------------------------------------------------------------------------
    def value(self, instr: HloInstruction, indices: Sequence[SSAValue]) -> list[SSAValue]:
        """The scalar(s) of `instr` at logical `indices` (one per array leaf of its shape)."""
        injected = self.overrides.get(id(instr))
        if injected is not None:
            return injected
        key = (id(instr), tuple(id(v) for v in indices))
        cached = self._values.get(key)
        if cached is not None:
            return cached
        owner = self.partitioned.find_subgraph(instr)
        if (self.subgraph is not None and owner is not self.subgraph and instr not in self.subgraph
                and not owner.constant_valued):
            result = self._call(owner, indices)
        else:
            result = self._emit(instr, list(indices))
        self._values[key] = result
        return result

    def scalar(self, instr: HloInstruction, indices: Sequence[SSAValue]) -> SSAValue:
        return self.value(instr, indices)[0]

    def _call(self, subgraph: Subgraph, indices: Sequence[SSAValue]) -> list[SSAValue]:
        """The values of `subgraph`'s root, by a `pure_call` of its function. A constant-valued
        subgraph (a broadcast scalar constant read from several subgraphs) is not called but emitted
        where it is read (`value`): one `arith.constant`, which the ops reading it fold at once (a
        shift by a constant amount needs no range check: elemental/ops.py); called, it met them
        only after the inliner, and every pass before the first `cse` carried the checks (on the
        threefry probe, 40% of the emitted ops). Its function, then unused, is erased by `inline`."""
        sig = subgraph.signature
        types = [element_type(r.shape.element_type) for r in sig.results]
        op = PureCallOp(subgraph.name, [*self.params, *indices], types)
        self.b.insert(op)
        return list(op.results)

    def _emit(self, instr: HloInstruction, indices: list[SSAValue]) -> list[SSAValue]:
        handler = INDEX_OPS.get(instr.opcode)
        if handler is not None:
            return handler(self, instr, indices)
        if instr.opcode in ELEMENTAL:
            maps = output_to_input(instr)
            args = [self.scalar(op, self.apply(m, indices)) for op, m in zip(instr.operands, maps)]
            return [emit_elementwise(self.b, instr, args)]
        raise UnsupportedError(f"unsupported: {instr.opcode} in a loop kernel (instruction '{instr.name}')")

    def operand_at(self, instr: HloInstruction, k: int, indices: Sequence[SSAValue],
                   runtime: Sequence[SSAValue] = ()) -> SSAValue:
        m = output_to_input(instr)[k]
        return self.scalar(instr.operand(k), self.apply(m, indices, (), runtime))

    @contextmanager
    def nested(self, block: Block) -> Iterator[KernelBuilder]:
        """Emit into `block` (a branch or loop body); values computed there are not reused outside."""
        saved = self._values, self._maps
        self._values, self._maps = dict(saved[0]), dict(saved[1])
        try:
            with self.b.at(block) as b:
                yield b
        finally:
            self._values, self._maps = saved

    def if_else_many(self, cond: SSAValue | None, then_fn, else_fn, result_types) -> list[SSAValue]:
        """scf.if cond { then_fn() } else { else_fn() } yielding the lists they return. No condition
        (`in_bounds` found nothing that restricts the domain) is always true."""
        if cond is None:
            return list(then_fn())
        blocks = []
        for fn in (then_fn, else_fn):
            block = Block()
            with self.nested(block) as b:
                b.insert(scf.YieldOp(*fn()))
            blocks.append(block)
        return list(self.b.insert(scf.IfOp(cond, list(result_types), Region(blocks[0]), Region(blocks[1]))).results)

    def if_else(self, cond: SSAValue | None, then_fn, else_fn, result_type) -> SSAValue:
        """`if_else_many` for one scalar."""
        return self.if_else_many(cond, lambda: [then_fn()], lambda: [else_fn()], [result_type])[0]
