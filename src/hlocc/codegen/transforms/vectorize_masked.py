"""Masked lane loops, the part of `vectorize-loads-stores-unaligned` (the CPU's form) for a thread's
vector that is only partly inside the output: the tail of a row whose length is not a multiple of
the vector, or the last thread of a grid.

`lower-xla-loops-to-scf` puts the body of a loop whose map has constraints under a per-lane
`scf.if`; such a loop was unrolled lane by lane, each element under its own branch. Here the guard
is read as a lane range, and the loop becomes a masked vector loop:

    scf.for %iv = 0 to N iter_args(%t...) {           %k = e0 - t + 1       (lanes below k)
      %c = <and of cmpi on apply_indexing results>    %mask = vector.create_mask %k
      %r = scf.if %c { body; insert..; yield }   ->   scf.if (scalar guards) && k >= 1 {
           else { yield %t... }                          masked transfer_read ..; the body on vectors;
      scf.yield %r                                       masked transfer_write ..
    }                                                  } else { %t... }

Each leaf of the guard compares two sides that are affine in the lane (`xla.apply_indexing`
results, values defined outside the loop, constants): with d = a - b = d0 + c * iv, c in
{-1, 0, 1}, a leaf is a scalar condition (c = 0), an upper end of the lanes (`iv < k`), or a lower
end, which must be provably 0 or less over the map's domain (else the loop is left alone: no
emitter makes one). Upper ends that the domain already makes N or more (`linear <= N - 1` where
the grid never reaches N) are dropped; without any upper end there is no mask at all.

The body is if-converted: its ops run for every lane, masked-off lanes computing on the masked
reads' zeros; that is sound because the body may hold only pure ops and element accesses (no
regions, no calls), every read and write ends up a masked vector access (contiguous in the lane)
or is hoisted as invariant (the same element for every lane, read by lane 0 anyway: the guard
requires k >= 1), and a body with any access left element by element is not converted. Integer
division by a masked lane's zero is no trap: the elemental emitter selects a safe divisor before
every division (XLA's x / 0 semantics), as it must for whole vectors too.

`vector.create_mask %k` holds the lanes below k (clamped to [0, N]); `lower-tensors` makes masked
transfers `llvm.masked.load/store` (AVX-512 mask registers; AVX2 has them for 32- and 64-bit
lanes, LLVM splits the rest), and `check-bounds` checks only the lanes a mask keeps.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from xdsl.dialects import arith, scf, tensor, vector
from xdsl.dialects.builtin import IndexType, IntegerAttr, VectorType, i1
from xdsl.ir import Block, Region, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from hlocc.analysis.affine_expr import Const, Expr, Var, VarKind, linear_form, replace_vars, rt, variables
from hlocc.analysis.indexing_map import IndexingMap, Variable
from hlocc.analysis.interval import Interval
from hlocc.codegen.ir import VECTOR_FORMS, ApplyIndexingOp, RemFOp
from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.transforms.util import defined_outside

UNKNOWN = Interval(-(1 << 62), 1 << 62)
"""The range of a value defined outside the loop (a runtime variable of the leaf's map)."""

# d = a - b; each predicate as (sign, threshold): sign * d >= threshold
_PREDICATES = {"sge": [(1, 0)], "sgt": [(1, 1)], "sle": [(-1, 0)], "slt": [(-1, 1)], "eq": [(1, 0), (-1, 0)]}
_CMPI_NAMES = ("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge")
_ALLOWED = (tensor.ExtractOp, tensor.InsertOp, ApplyIndexingOp, RemFOp, vector.ExtractOp, vector.InsertOp,
            vector.BroadcastOp, *VECTOR_FORMS.values())


@dataclass(frozen=True)
class _Side:
    """One side of a compare: `expr` over `m`'s variables at `operands` (None: the lane, at 0), and
    the lane's coefficient."""

    m: IndexingMap
    expr: Expr
    operands: tuple[SSAValue | None, ...]
    coefficient: int


def _side(v: SSAValue, loop: scf.ForOp, iv: SSAValue) -> _Side | None:
    owner = v.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return _Side(IndexingMap((), ()), Const(owner.value.value.data), (), 0)
    if defined_outside(v, loop) and not isinstance(owner, ApplyIndexingOp):
        return _Side(IndexingMap((), (), runtime=(Variable(UNKNOWN),)), rt(0), (v,), 0)
    if not isinstance(owner, ApplyIndexingOp):
        return None
    m = owner.map
    operands = list(owner.operands_)
    if any(x is not iv and not defined_outside(x, loop) for x in operands):
        return None
    expr = m.results[list(owner.results_).index(v)]
    groups = [(VarKind.DIM, len(m.dims)), (VarKind.SYMBOL, len(m.symbols)), (VarKind.RUNTIME, len(m.runtime))]
    lane_vars = []
    position = 0
    for kind, count in groups:
        lane_vars += [Var(kind, k) for k in range(count) if operands[position + k] is iv]
        position += count
    terms, _ = linear_form(expr)
    coefficient = sum(terms.pop(var, 0) for var in lane_vars)
    if any(var in variables(atom) for atom in terms for var in lane_vars):
        return None  # the lane inside a div or mod
    pin = Interval(0, 0)
    pinned = replace(m, dims=tuple(replace(d, bounds=pin) if Var(VarKind.DIM, k) in lane_vars else d
                                   for k, d in enumerate(m.dims)),
                     symbols=tuple(replace(s, bounds=pin) if Var(VarKind.SYMBOL, k) in lane_vars else s
                                   for k, s in enumerate(m.symbols)),
                     runtime=tuple(replace(r, bounds=pin) if Var(VarKind.RUNTIME, k) in lane_vars else r
                                   for k, r in enumerate(m.runtime)), constraints=())
    return _Side(pinned, expr, tuple(None if x is iv else x for x in operands), coefficient)


def _difference(a: _Side, b: _Side, sign: int) -> _Side:
    """sign * (a - b) over the concatenation of the two maps' variables."""
    shift = {VarKind.DIM: len(a.m.dims), VarKind.SYMBOL: len(a.m.symbols), VarKind.RUNTIME: len(a.m.runtime)}
    b_expr = replace_vars(b.expr, lambda v: Var(v.kind, v.index + shift[v.kind]))
    m = IndexingMap(a.m.dims + b.m.dims, (), a.m.symbols + b.m.symbols, a.m.runtime + b.m.runtime)
    na, nb = (len(a.m.dims), len(a.m.symbols)), (len(b.m.dims), len(b.m.symbols))
    operands = (a.operands[:na[0]] + b.operands[:nb[0]] + a.operands[na[0]:na[0] + na[1]]
                + b.operands[nb[0]:nb[0] + nb[1]] + a.operands[na[0] + na[1]:] + b.operands[nb[0] + nb[1]:])
    return _Side(m, (a.expr - b_expr) * sign, operands, sign * (a.coefficient - b.coefficient))


def _leaves(cond: SSAValue) -> list[arith.CmpiOp] | None:
    """The index compares whose conjunction `cond` is (an `arith.andi` tree), or None."""
    owner = cond.owner
    if isinstance(owner, arith.AndIOp):
        lhs, rhs = _leaves(owner.lhs), _leaves(owner.rhs)
        return None if lhs is None or rhs is None else lhs + rhs
    if isinstance(owner, arith.CmpiOp) and isinstance(owner.lhs.type, IndexType):
        return [owner]
    return None


@dataclass
class _Guard:
    """The guard as scalar conditions (each f >= 0) and upper lane ends (lanes below each f), every
    f a one-result map at operands (None: the lane, at 0)."""

    scalars: list[_Side]
    uppers: list[_Side]


def _guard(cond: SSAValue, loop: scf.ForOp, iv: SSAValue, lanes: int) -> _Guard | None:
    leaves = _leaves(cond)
    if leaves is None:
        return None
    guard = _Guard([], [])
    for leaf in leaves:
        predicate = _CMPI_NAMES[leaf.predicate.value.data]
        a, b = _side(leaf.lhs, loop, iv), _side(leaf.rhs, loop, iv)
        if predicate not in _PREDICATES or a is None or b is None:
            return None
        for sign, threshold in _PREDICATES[predicate]:
            d = _difference(a, b, sign)  # d0 + c * lane >= threshold
            low = d.m.expr_range(d.expr).lo  # (of d0)
            if d.coefficient == 0:
                if low < threshold:
                    guard.scalars.append(replace(d, expr=d.expr - threshold))
            elif d.coefficient == -1:  # lane <= d0 - threshold: the lanes below d0 - threshold + 1
                if low - threshold + 1 < lanes:
                    guard.uppers.append(replace(d, expr=d.expr - threshold + 1))
            elif d.coefficient != 1 or low < threshold:  # (c = 1: lane >= threshold - d0, at most 0)
                return None
    return guard


def _convertible(if_op: scf.IfOp, loop: scf.ForOp) -> bool:
    """The loop is `[guard computation..., scf.if, yield]`, the if yields the loop's next values and
    its else its current ones, and its then-block holds only pure ops and element accesses."""
    body = loop.body.block
    ops = list(body.ops)
    if len(ops) < 2 or ops[-2] is not if_op or list(ops[-1].operands) != list(if_op.results):
        return False
    if len(if_op.results) != len(body.args) - 1 or if_op.false_region.block.last_op is None:
        return False
    if list(if_op.false_region.block.last_op.operands) != list(body.args[1:]):
        return False
    then_ops = list(if_op.true_region.block.ops)[:-1]
    return all(not op.regions and (isinstance(op, _ALLOWED) or op.name.startswith(("arith.", "math.", "complex.")))
               for op in then_ops)


def _emit(b: KernelBuilder, side: _Side) -> SSAValue:
    zero = b.index(0)
    operands = [zero if x is None else x for x in side.operands]
    return b.insert(ApplyIndexingOp(IndexingMap(side.m.dims, (side.expr,), side.m.symbols, side.m.runtime),
                                    operands)).results[0]


def _if_convert(loop: scf.ForOp) -> None:
    """Run the guarded body of `loop` unconditionally (its if's then-block inlined, the guard's
    computation erased)."""
    body = loop.body.block
    if_op = list(body.ops)[-2]
    then_block = if_op.true_region.block
    values = list(then_block.last_op.operands)
    for op in list(then_block.ops)[:-1]:
        op.detach()
        Rewriter.insert_op(op, InsertPoint.before(if_op))
    for old, new in zip(if_op.results, values):
        old.replace_all_uses_with(new)
    Rewriter.erase_op(if_op)
    for op in reversed(list(body.ops)[:-1]):
        if not op.regions and all(r.first_use is None for r in op.results) and \
                isinstance(op, (ApplyIndexingOp, arith.ConstantOp, arith.CmpiOp, arith.AndIOp)):
            Rewriter.erase_op(op)


Vectorizer = Callable[[scf.ForOp, SSAValue | None], scf.ForOp]
"""Vectorize a loop's contiguous accesses with a mask (or none); returns the loop (rebuilt)."""


def vectorize_masked_lanes(loop: scf.ForOp, lanes: int, vectorize: Vectorizer) -> bool:
    """Turn a lane loop whose body runs under a per-lane guard into a masked vector loop (module
    doc); False (the loop unchanged) when it does not have that form or an access would stay
    element by element."""
    body = loop.body.block
    ops = list(body.ops)
    if len(ops) < 2 or not isinstance(ops[-2], scf.IfOp) or not _convertible(ops[-2], loop):
        return False
    guard = _guard(ops[-2].cond, loop, body.args[0], lanes)
    if guard is None:
        return False
    marker = loop.prev_op
    b = KernelBuilder(InsertPoint.before(loop))
    conditions = [b.cmpi("sge", _emit(b, s), b.index(0)) for s in guard.scalars]
    mask = None
    if guard.uppers:
        ends = [_emit(b, s) for s in guard.uppers]
        end = ends[0]
        for e in ends[1:]:
            end = b.add(arith.MinSIOp(end, e))
        mask = b.add(vector.CreateMaskOp([end], VectorType(i1, [lanes])))
        conditions.append(b.cmpi("sge", end, b.index(1)))
    clone = loop.clone()
    cond = b.and_(conditions)
    if cond is None:  # every lane always inside (no mask, no scalar guard): no branch either
        b.insert(clone)
        for old, new in zip(loop.results, clone.results):
            old.replace_all_uses_with(new)
        Rewriter.erase_op(loop)
        _if_convert(clone)
        vectorize(clone, None)
        return True
    then_block, else_block = Block(), Block()
    then_block.add_op(clone)
    then_block.add_op(scf.YieldOp(*clone.results))
    else_block.add_op(scf.YieldOp(*loop.iter_args))
    if_op = b.insert(scf.IfOp(cond, [r.type for r in loop.results], Region(then_block), Region(else_block)))
    _if_convert(clone)
    clone = vectorize(clone, mask)
    if mask is not None and any(isinstance(op, (tensor.ExtractOp, tensor.InsertOp)) for op in clone.walk()):
        Rewriter.erase_op(if_op)
        while loop.prev_op is not marker:
            Rewriter.erase_op(loop.prev_op)
        return False
    for old, new in zip(loop.results, if_op.results):
        old.replace_all_uses_with(new)
    Rewriter.erase_op(loop)
    return True
