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
grid) as one masked loop, each access a masked vector access (vectorize_masked.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, scf, tensor, vector
from xdsl.dialects.builtin import (
    AffineMapAttr,
    ArrayAttr,
    BoolAttr,
    ComplexType,
    DenseIntOrFPElementsAttr,
    IndexType,
    IntegerType,
    ModuleOp,
    VectorType,
)
from xdsl.ir import SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from hlocc.analysis.indexing_map import contiguity
from hlocc.codegen.ir import ApplyIndexingOp
from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.transforms.util import defined_outside, trip_count
from hlocc.codegen.transforms.vectorize_elementwise import hoist_invariants
from hlocc.codegen.transforms.vectorize_masked import vectorize_masked_lanes

VECTOR_SIZES = (2, 4, 8, 16, 32, 64)


def _contiguous_offset(index: SSAValue, iv: SSAValue, loop: scf.ForOp, n: int, b: KernelBuilder,
                       aligned: bool = True) -> SSAValue | None:
    """The index at iv = 0, emitted before the loop, if `index` is `offset + iv` with offset (a
    multiple of n when `aligned`) computed from values defined outside the loop; else None."""
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
    if c is None or c.stride != 1 or (aligned and (c.alignment % n if c.alignment else 0)):
        return None
    zero_operands = [b.index(0) if v is iv else v for v in operands]
    return b.insert(ApplyIndexingOp(m, zero_operands)).results[0]


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
            if offset is None:
                continue
            vtype = VectorType(op.result.type, [n])
            read = b.add(vector.TransferReadOp(op.tensor, [offset], b.constant(0, op.result.type)
                                               if isinstance(op.result.type, (IntegerType, IndexType))
                                               else b.constant(0.0, op.result.type),
                                               vtype, _in_bounds(), _identity_1d(), mask))
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


def _vectorize_masked(loop: scf.ForOp, mask: SSAValue | None) -> scf.ForOp:
    """The unaligned reads and stores of `loop` as vectors under `mask` (vectorize_masked.py);
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
