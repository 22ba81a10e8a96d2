"""`vectorize-elementwise` (CPU): a small loop over the lanes of vectors whose body is pure
elementwise work becomes that work on whole vectors.

After `vectorize-loads-stores`, a loop fusion's thread computes `vector.extract %v[%iv]` → scalar
arith/math → `vector.insert %x, %acc[%iv]` for iv in [0, N). On a GPU each thread does this
serially; on the CPU the thread's elements fill one SIMD register, so the loop is replaced by the
same ops on `vector<N x T>` (scalars from outside the loop are broadcast; compares, selects and
integer casts become their `xla` stand-ins, `dialect.VECTOR_FORMS`). This is an explicit
superword-level vectorization that does not depend on LLVM's SLP vectorizer finding it. A loop
with anything else in its body (branches, memory accesses, calls) is left for `unroll-loops`.

First, the loop-invariant work of every loop that runs at least once is hoisted out of it (innermost
loops first, so a value the same for a whole row leaves the chunk loop too): pure arith/math ops,
`xla.apply_indexing`, and reads (`tensor.extract`, `vector.extract`, `vector.transfer_read`) of
values defined outside, all of whose operands are defined outside the loop. Emitters compute every
element's index from the full index, so a broadcast operand's element (a softmax's row maximum) is
read inside the lane loop through an `apply_indexing` that also yields the lane's column: a
multi-result `apply_indexing` is split, its results that use only invariant operands hoisted as
their own op (the other operands, which those results do not read, replaced by their lower bound).
Without this the read stays in the loop and the loop is unrolled lane by lane (for a bf16 softmax
LLVM's SLP vectorizer put the lanes back together, at 5x the compile time). Only ops at the top
level of a body that runs at least once are moved, so nothing runs that would not have run (a read
out of bounds, a division by zero). Writes (`tensor.insert`, `vector.transfer_write`) are never
moved; a read moved before the loop reads the same SSA value, earlier. Constants stay (a hoisted op
gets a copy): vectorization splats a body constant where it is used.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, scf, tensor, vector
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, VectorType
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from hlocc.analysis.affine_expr import variables
from hlocc.analysis.indexing_map import IndexingMap
from hlocc.codegen.ir import VECTOR_FORMS, ApplyIndexingOp, RemFOp
from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.transforms.util import defined_outside, trip_count

_ELEMENTWISE_DIALECTS = ("arith.", "math.")
_NOT_ELEMENTWISE = (arith.ConstantOp, arith.IndexCastOp)


def _is_elementwise(op: Operation) -> bool:
    if isinstance(op, RemFOp):
        return True
    return op.name.startswith(_ELEMENTWISE_DIALECTS) and not isinstance(op, _NOT_ELEMENTWISE)


_HOISTABLE_READS = (tensor.ExtractOp, vector.ExtractOp, vector.TransferReadOp, vector.BroadcastOp)


def _runs_at_least_once(loop: scf.ForOp) -> bool:
    bounds = []
    for v in (loop.lb, loop.ub):
        if not (isinstance(v.owner, arith.ConstantOp) and isinstance(v.owner.value, IntegerAttr)):
            return False
        bounds.append(v.owner.value.value.data)
    return bounds[0] < bounds[1]


def _hoistable(op: Operation) -> bool:
    # (an index cast is not elementwise work to vectorize, but it is pure: a gather's row index)
    return not op.regions and (_is_elementwise(op) or isinstance(op, _HOISTABLE_READS + (arith.IndexCastOp,))
                               or type(op) in VECTOR_FORMS.values())


def _invariant(v: SSAValue, loop: scf.ForOp) -> bool:
    return defined_outside(v, loop) or isinstance(v.owner, arith.ConstantOp)


def hoist_invariants(loop: scf.ForOp) -> None:
    """Move the loop-invariant ops of `loop`'s body (see the module docstring) before it. Constants
    stay (vectorization splats them where they are used); a hoisted op that uses one gets a copy."""
    if not _runs_at_least_once(loop):
        return
    before = InsertPoint.before(loop)
    for op in list(loop.body.block.ops)[:-1]:
        if isinstance(op, ApplyIndexingOp):
            _hoist_apply_indexing(op, loop)
        elif _hoistable(op) and all(_invariant(v, loop) for v in op.operands):
            for k, v in enumerate(op.operands):
                if not defined_outside(v, loop):
                    copy = v.owner.clone()
                    Rewriter.insert_op(copy, before)
                    op.operands[k] = copy.results[0]
            op.detach()
            Rewriter.insert_op(op, before)
    for op in reversed(list(loop.body.block.ops)):  # what only the hoisted ops used
        if isinstance(op, ApplyIndexingOp | arith.ConstantOp) and all(r.first_use is None for r in op.results):
            Rewriter.erase_op(op)


def _hoist_apply_indexing(op: ApplyIndexingOp, loop: scf.ForOp) -> None:
    """Hoist the results of `op` computed from operands defined outside `loop` alone."""
    m = op.map
    operands = list(op.operands_)
    variant = {k for k, v in enumerate(operands) if not defined_outside(v, loop)}
    first = {0: 0, 1: len(m.dims), 2: len(m.dims) + len(m.symbols)}  # operand of a Var: by its kind
    invariant = [k for k, (e, r) in enumerate(zip(m.results, op.results_))
                 if r.first_use is not None and not any(first[v.kind] + v.index in variant for v in variables(e))]
    if invariant and not variant:
        op.detach()
        Rewriter.insert_op(op, InsertPoint.before(loop))
        return
    if invariant:
        b = KernelBuilder(InsertPoint.before(loop))
        bounds = [*m.dims, *m.symbols, *m.runtime]
        outside = [b.index(bounds[k].bounds.lo) if k in variant else v for k, v in enumerate(operands)]
        hoisted = b.insert(ApplyIndexingOp(IndexingMap(m.dims, tuple(m.results[k] for k in invariant), m.symbols,
                                                       m.runtime), outside))
        for k, new in zip(invariant, hoisted.results_):
            op.results_[k].replace_all_uses_with(new)
            new.name_hint = op.results_[k].name_hint


def _vectorizable(loop: scf.ForOp, n: int) -> bool:
    body = loop.body.block
    iv = body.args[0]
    ops = list(body.ops)
    for op in ops[:-1]:
        if isinstance(op, vector.ExtractOp):
            ok = (list(op.dynamic_position) == [iv] and defined_outside(op.vector, loop)
                  and op.vector.type.get_shape() == (n,))
        elif isinstance(op, vector.InsertOp):
            ok = list(op.dynamic_position) == [iv] and op.dest.type.get_shape() == (n,)
        elif isinstance(op, arith.ConstantOp):
            ok = not isinstance(op.result.type, VectorType)
        else:
            ok = _is_elementwise(op) and not any(isinstance(v.type, VectorType) for v in op.operands)
        if not ok:
            return False
    # Every vector.insert accumulates into a loop-carried vector that is yielded at its own position.
    carried = list(body.args[1:])
    accumulated = set()
    for op in ops:
        if isinstance(op, vector.InsertOp):
            if op.dest not in carried or ops[-1].operands[carried.index(op.dest)] is not op.result:
                return False
            accumulated.add(carried.index(op.dest))
    if any(k not in accumulated and ops[-1].operands[k] is not arg for k, arg in enumerate(carried)):
        return False
    return any(isinstance(op, vector.InsertOp) for op in ops)


def _vector_op(op: Operation, operands: list[SSAValue], types: list[VectorType]) -> Operation:
    """`op` on vectors: the same op, or its `xla` stand-in where xDSL's arith takes only scalars."""
    cls = VECTOR_FORMS.get(type(op), type(op))
    # The stand-ins declare arith's properties but fastmath (arith.cmpf's is 'none' in kernels).
    props = {k: v for k, v in op.properties.items() if k in cls.get_irdl_definition().properties}
    return cls.create(operands=operands, result_types=types, properties=props, attributes=dict(op.attributes))


def _vectorize(loop: scf.ForOp) -> bool:
    n = trip_count(loop)
    if n is None or n < 2 or not _vectorizable(loop, n):
        return False
    body = loop.body.block
    carried = list(body.args[1:])
    mapping: dict[SSAValue, SSAValue] = {}
    results = list(loop.iter_args)
    new_ops: list[Operation] = []

    def vec(v: SSAValue) -> SSAValue:
        if v in mapping:
            return mapping[v]
        # A scalar from outside the loop (or a constant inside it): the same value in every lane.
        splat = vector.BroadcastOp(v, VectorType(v.type, [n]))
        new_ops.append(splat)
        mapping[v] = splat.results[0]
        return mapping[v]

    for op in list(body.ops)[:-1]:
        if isinstance(op, arith.ConstantOp):
            # Every use of a body constant is an elementwise op, which now takes vectors: splat it.
            c = op.clone()
            new_ops.append(c)
            vec(c.result)
            mapping[op.result] = mapping[c.result]
        elif isinstance(op, vector.ExtractOp):
            mapping[op.result] = op.vector
        elif isinstance(op, vector.InsertOp):
            k = carried.index(op.dest)
            results[k] = vec(op.source)
        else:
            operands = [vec(v) for v in op.operands]
            types = [VectorType(r.type, [n]) for r in op.results]
            new = _vector_op(op, operands, types)
            new_ops.append(new)
            for old, r in zip(op.results, new.results):
                mapping[old] = r
                r.name_hint = old.name_hint
    try:  # an op whose vector form does not verify: then leave the loop alone
        for new in new_ops:
            new.verify_()
            new.verify()
    except Exception:  # noqa: BLE001 - any verifier failure means "not vectorizable"
        for new in reversed(new_ops):
            new.erase(safe_erase=False)
        return False
    Rewriter.insert_op(new_ops, InsertPoint.before(loop))
    for old, new in zip(loop.results, results):
        old.replace_all_uses_with(new)
    Rewriter.erase_op(loop)
    return True


@dataclass(frozen=True)
class VectorizeElementwisePass(ModulePass):
    name = "vectorize-elementwise"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for loop in reversed([o for o in op.walk() if isinstance(o, scf.ForOp)]):  # inner loops first
            hoist_invariants(loop)
            _vectorize(loop)

