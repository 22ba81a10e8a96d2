"""`vectorize-loads-stores`: contiguous, aligned element accesses in a small `scf.for` become one
vector access hoisted out of the loop (seed 000 "Vectorization"; XLA's vectorize_loads_stores.cc).

In a loop `scf.for %iv = 0 to N step 1` (N in {2, 4, 8, 16, 32, 64}), where
- `tensor.extract %t[%i]` reads a tensor defined outside the loop at
  `%i = xla.apply_indexing #map(...)[..., %iv, ...]` with `%i = offset + %iv` and offset always a
  multiple of N (`contiguity` of the map): the read becomes
  `vector.transfer_read %t[offset]` before the loop and `vector.extract %v[%iv]` inside;
- `tensor.insert %x into %iter[%i]`, `%iter` a loop-carried tensor yielded right back, with the same
  kind of index: the element goes into a new loop-carried vector (`vector.insert`), written after
  the loop with one `vector.transfer_write`.
All other operands of the index computation must be defined outside the loop. Complex elements
are left alone (a vector of complex numbers has no LLVM type): their loop is unrolled instead.

`vectorize-loads-stores-unaligned` (the CPU pipeline's) drops the alignment condition for elements
of a byte or more: any offset will do. The alignment is XLA's GPU condition (a vector access there
is aligned to its size, llvm/memory_ops.py); a CPU vector access is only element-aligned, so an
unaligned one is legal and about as fast. Without it a row whose length is not a multiple of the
vector, which every symbolic row length is at compile time, was read and written element by
element: LLVM re-vectorized a negate but not an exponential's expansion (a symbolic [4, s, s]
softmax exp was 2.5x slower than the static kernel at s = 512). It also vectorizes a loop whose
body runs under a per-lane bounds guard (a partial vector: a row's last chunk, the last thread of a
grid) as one masked loop, each access a masked vector access (below).

Masked lane loops (`vectorize_masked_lanes`, the unaligned form only): `lower-xla-loops-to-scf`
puts the body of a loop whose map has constraints under a per-lane `scf.if`; such a loop was
unrolled lane by lane, each element under its own branch. Here the guard is read as a lane range,
and the loop becomes a masked vector loop:

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
reads' zeros; a loop-carried scalar (a reduction's accumulator: 0 is no min's, max's, mul's or and's
neutral value) takes the body's value only in the lanes below k (`arith.select`), keeping its own in
the others as the guard's else did. That is sound because the body may hold only pure ops and element accesses (no
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

from xdsl.context import Context
from xdsl.dialects import arith, scf, tensor, vector
from xdsl.dialects.builtin import (
    AffineMapAttr,
    ArrayAttr,
    BoolAttr,
    ComplexType,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    TensorType,
    VectorType,
    i1,
    i64,
)
from xdsl.ir import Block, Region, SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from hlocc.analysis.affine_expr import Const, Expr, Var, VarKind, linear_form, replace_vars, rt, variables
from hlocc.analysis.indexing_map import IndexingMap, Variable, contiguity
from hlocc.analysis.interval import Interval
from hlocc.codegen.ir import VECTOR_FORMS, ApplyIndexingOp, RemFOp
from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.transforms.util import defined_outside, trip_count
from hlocc.codegen.transforms.vectorize_elementwise import hoist_invariants

VECTOR_SIZES = (2, 4, 8, 16, 32, 64)


def _lane_index(index: SSAValue, iv: SSAValue, loop: scf.ForOp):
    """(map, operands, contiguity in iv) where `index` is one `xla.apply_indexing` result whose only
    loop-defined operand is the range variable `iv`; else None."""
    producer = index.owner
    if not isinstance(producer, ApplyIndexingOp) or len(producer.results) != 1:
        return None
    m = producer.map
    operands = list(producer.operands_)
    nd = len(m.dims)
    positions = [k for k, v in enumerate(operands) if v is iv]
    if len(positions) != 1 or not nd <= positions[0] < nd + len(m.symbols):
        return None
    if any(not defined_outside(v, loop) for v in operands if v is not iv):
        return None
    c = contiguity(m, positions[0] - nd, 0)
    return None if c is None else (m, operands, c)


def _contiguous_offset(index: SSAValue, iv: SSAValue, loop: scf.ForOp, n: int, b: KernelBuilder,
                       aligned: bool = True, stride: int = 1) -> SSAValue | None:
    """The index at iv = 0, emitted before the loop, if `index` is `offset + iv` with offset (a
    multiple of n when `aligned`) computed from values defined outside the loop; else None. With
    `stride` -1 (`offset - iv`, a reversed run: jnp.flip, a reverse scan's reads), the index at
    iv = n - 1, where the run starts in memory."""
    lane = _lane_index(index, iv, loop)
    if lane is None:
        return None
    m, operands, c = lane
    if c.stride != stride or (aligned and (c.alignment % n if c.alignment else 0)):
        return None
    first = b.index(0 if stride == 1 else n - 1)
    return b.insert(ApplyIndexingOp(m, [first if v is iv else v for v in operands])).results[0]


def _sub_byte(element) -> bool:
    """Elements under 8 bits (pred, s4, f4) share bytes: a vector of them starts at a byte only at an
    aligned offset, so the unaligned form keeps the alignment condition for them."""
    bits = getattr(element, "bitwidth", None)
    return bits is not None and bits < 8


def _identity_1d() -> AffineMapAttr:
    return AffineMapAttr(AffineMap.identity(1))


def _in_bounds() -> ArrayAttr:
    return ArrayAttr([BoolAttr(True, IntegerType(1))])


def _vectorize_reads(loop: scf.ForOp, aligned: bool = True, mask: SSAValue | None = None) -> None:
    """Vectorize `loop`'s contiguous reads in place (one scan of the body: a store's rebuild of the
    loop makes no new read to vectorize); with `mask`, the vector reads only its lanes."""
    n = trip_count(loop)
    if n not in VECTOR_SIZES:
        return
    hoist_invariants(loop)  # (an index computed in the loop from values outside it: a gather's row)
    body = loop.body.block
    iv = body.args[0]
    b = KernelBuilder(InsertPoint.before(loop))
    for op in list(body.ops):
        if isinstance(op, tensor.ExtractOp) and len(op.indices) == 1 and defined_outside(op.tensor, loop) \
                and not isinstance(op.result.type, ComplexType):
            offset = _contiguous_offset(op.indices[0], iv, loop, n, b, aligned or _sub_byte(op.result.type))
            reverse = offset is None and not aligned and mask is None and not _sub_byte(op.result.type)
            if reverse:  # a reversed run: read it where it starts in memory, then reverse the lanes
                offset = _contiguous_offset(op.indices[0], iv, loop, n, b, False, stride=-1)
            if offset is None:
                continue
            vtype = VectorType(op.result.type, [n])
            read = b.add(vector.TransferReadOp(op.tensor, [offset], b.constant(0, op.result.type)
                                               if isinstance(op.result.type, (IntegerType, IndexType))
                                               else b.constant(0.0, op.result.type),
                                               vtype, _in_bounds(), _identity_1d(), mask))
            if reverse:
                read = b.add(vector.ShuffleOp(read, read, DenseArrayBase.from_list(i64, list(range(n - 1, -1, -1))),
                                              result_type=vtype))
            Rewriter.replace_op(op, vector.ExtractOp(read, [iv], op.result.type))


def _vectorize_store(loop: scf.ForOp, aligned: bool = True, mask: SSAValue | None = None) -> scf.ForOp | None:
    """Vectorize `loop`'s first vectorizable store into a loop-carried tensor; returns the loop
    rebuilt for that store (whose other stores the caller looks at next), else None. With `mask`,
    the vector write stores only its lanes."""
    n = trip_count(loop)
    if n not in VECTOR_SIZES:
        return None
    body = loop.body.block
    iv = body.args[0]
    yield_op = body.last_op
    b = KernelBuilder(InsertPoint.before(loop))
    carried = list(body.args[1:])
    for k, arg in enumerate(carried):
        uses = list(arg.uses)
        if len(uses) != 1 or not isinstance(uses[0].operation, tensor.InsertOp):
            continue
        insert = uses[0].operation
        if insert.dest is not arg or len(insert.indices) != 1 or yield_op.operands[k] is not insert.result \
                or len(list(insert.result.uses)) != 1 or isinstance(insert.scalar.type, ComplexType):
            continue
        offset = _contiguous_offset(insert.indices[0], iv, loop, n, b, aligned or _sub_byte(insert.scalar.type))
        if offset is None:
            continue
        return _add_vector_carry(loop, k, insert, offset, n, mask)
    return None


def _add_vector_carry(loop: scf.ForOp, k: int, insert: tensor.InsertOp, offset: SSAValue, n: int,
                      mask: SSAValue | None = None) -> scf.ForOp:
    """Rebuild `loop` with an extra vector iter_arg collecting what `insert` stored into iter_arg k;
    returns the new loop."""
    body = loop.body.block
    elem = insert.scalar.type
    vtype = VectorType(elem, [n])
    b = KernelBuilder(InsertPoint.before(loop))
    zero = 0 if isinstance(elem, (IntegerType, IndexType)) else 0.0
    init = b.add(arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(vtype, [zero] * n), vtype))
    # The body moves into the new loop as it is, with one more argument: moving its ops one by one
    # cost a walk of the whole body per vectorized store (quadratic in a many-output kernel).
    iter_vec = body.insert_arg(vtype, len(body.args))
    iv = body.args[0]
    yield_op = body.last_op
    inserted = vector.InsertOp(insert.scalar, iter_vec, [iv])
    Rewriter.insert_op(inserted, InsertPoint.before(insert))
    insert.result.replace_all_uses_with(insert.dest)
    Rewriter.erase_op(insert)
    Rewriter.replace_op(yield_op, scf.YieldOp(*yield_op.operands, inserted.result))
    new_loop = scf.ForOp(loop.lb, loop.ub, loop.step, [*loop.iter_args, init],
                         Rewriter.move_region_contents_to_new_regions(loop.body))
    Rewriter.insert_op(new_loop, InsertPoint.before(loop))
    tensor_result = new_loop.results[k]
    write = vector.TransferWriteOp(new_loop.results[-1], tensor_result, [offset], _in_bounds(), mask,
                                   permutation_map=_identity_1d(), result_type=tensor_result.type)
    Rewriter.insert_op(write, InsertPoint.after(new_loop))
    for i, old in enumerate(loop.results):
        old.replace_all_uses_with(write.results[0] if i == k else new_loop.results[i])
    Rewriter.erase_op(loop)
    return new_loop


# -- masked lane loops (module doc) --------------------------------------------------------------

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


def _if_convert(loop: scf.ForOp, end: SSAValue | None = None) -> None:
    """Run the guarded body of `loop` unconditionally (its if's then-block inlined, the guard's
    computation erased). With `end` (the mask's lane end), a loop-carried value other than a tensor
    (a reduction's accumulator) takes the body's value only in the lanes below `end` and keeps its
    current one in the others, as the if's else did: a masked-off lane's body ran on the masked
    reads' zeros, which are no reducer's neutral value (min, max, mul, and). A carried tensor needs
    no select: its inserts become masked writes (or the loop is left alone)."""
    body = loop.body.block
    if_op = list(body.ops)[-2]
    then_block = if_op.true_region.block
    values = list(then_block.last_op.operands)
    for op in list(then_block.ops)[:-1]:
        op.detach()
        Rewriter.insert_op(op, InsertPoint.before(if_op))
    if end is not None and any(not isinstance(v.type, TensorType) for v in values):
        b = KernelBuilder(InsertPoint.before(if_op))
        active = b.cmpi("slt", body.args[0], end)
        values = [v if isinstance(v.type, TensorType) or v is current else b.select(active, v, current)
                  for v, current in zip(values, body.args[1:])]
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
    mask = end = None
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
    _if_convert(clone, end)
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


def _vectorize_masked(loop: scf.ForOp, mask: SSAValue | None) -> scf.ForOp:
    """The unaligned reads and stores of `loop` as vectors under `mask` (`vectorize_masked_lanes`);
    returns the loop as the last store rebuilt it."""
    _vectorize_reads(loop, False, mask)
    while (rebuilt := _vectorize_store(loop, False, mask)) is not None:
        loop = rebuilt
    return loop


@dataclass(frozen=True)
class VectorizeLoadsStoresPass(ModulePass):
    name = "vectorize-loads-stores"
    aligned = True  # offsets a multiple of the vector length only (module doc)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        # One walk: each loop to its fixed point (a store rebuilds the loop, whose other stores come
        # next). Nothing a loop's vectorization does opens a chance in another loop (it makes
        # vector ops, which no rule reads), so the module is not walked again after each change;
        # restarting the walk per change had cost a walk per vectorized loop and per output.
        for loop in [o for o in op.walk() if isinstance(o, scf.ForOp)]:
            if not self.aligned and trip_count(loop) in VECTOR_SIZES and \
                    vectorize_masked_lanes(loop, trip_count(loop), _vectorize_masked):
                continue
            _vectorize_reads(loop, self.aligned)
            while loop is not None:
                loop = _vectorize_store(loop, self.aligned)


@dataclass(frozen=True)
class VectorizeUnalignedLoadsStoresPass(VectorizeLoadsStoresPass):
    """`vectorize-loads-stores` at any offset: the CPU's form (module doc)."""

    name = "vectorize-loads-stores-unaligned"
    aligned = False
