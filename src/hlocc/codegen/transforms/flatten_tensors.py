"""`flatten-tensors`: make every tensor 1-D (seed 000 "Flatten tensors"; XLA's flatten_tensors.cc).

Tensors are already in physical (major-to-minor) order (elemental/storage.py), so the linear index is
row-major. Each `tensor.extract`/`tensor.insert` gets one index, computed by an `xla.apply_indexing`;
when its indices were all results of one `xla.apply_indexing`, the linearisation is composed into
that map, so the seed's GELU kernel reads `%input[%dim]` with
`(th_x, bl_x)[vector_index] -> (bl_x * 512 + th_x * 4 + vector_index)`. A tensor with symbolic
sizes (`tensor<?x128xf32, ["b", "128"]>`, mlir_types.tensor_type) linearises with its sizes as
`$b` atoms and becomes `tensor<?xf32, ["128*b"]>`. Function signatures,
loop-carried values, branch results, calls and tensor constants change type with them. A rank-0
tensor becomes `tensor<1xT>`. `xla.atomic_rmw` is linearised like `tensor.insert`.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, tensor
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, FunctionType, ModuleOp, TensorType
from xdsl.ir import Attribute, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from hlocc.analysis.indexing_map import IndexingMap, compose
from hlocc.analysis.linearize import linearize_map
from hlocc.codegen.ir import ApplyIndexingOp, AtomicRMWOp
from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.ir.mlir_types import sized_tensor_type, tensor_num_elements, tensor_sizes
from hlocc.codegen.transforms.util import walk_ops
from hlocc.hlo.symbolic import Dim


def flat_type(t: Attribute) -> Attribute:
    if isinstance(t, TensorType) and len(t.get_shape()) != 1:
        return sized_tensor_type(t.element_type, [tensor_num_elements(t)])
    return t


def emit_linear_index(b: KernelBuilder, shape: tuple[Dim, ...], indices: list[SSAValue]) -> SSAValue:
    """The row-major linear index of `indices` in `shape`, as one `xla.apply_indexing` (folded into
    the one that computed `indices` when there is one)."""
    if not shape:
        return b.index(0)
    producer = indices[0].owner if isinstance(indices[0].owner, ApplyIndexingOp) else None
    if producer is None or list(producer.results) != list(indices):
        return indices[0] if len(shape) == 1 else b.insert(ApplyIndexingOp(linearize_map(shape), indices)).results[0]
    folded = _fold_chain(producer)
    if len(shape) == 1:
        return indices[0] if folded is None else b.insert(ApplyIndexingOp(*folded)).results[0]
    base, operands = folded or (producer.map, list(producer.operands_))
    return b.insert(ApplyIndexingOp(_composed(base, linearize_map(shape)), operands)).results[0]


def _composed(first: IndexingMap, second: IndexingMap) -> IndexingMap:
    """`second ∘ first` without constraints (their bounds hold by construction), its variables
    those of the operands (first's dims; second's symbols, then first's; the same for runtime
    variables), each kept where the composition no longer uses it."""
    m = compose(first, second, simplify=False)
    return IndexingMap(m.dims, m.results, m.symbols, m.runtime).simplify_results()


def _fold_chain(producer: ApplyIndexingOp) -> tuple[IndexingMap, list[SSAValue]] | None:
    """`producer`'s map composed onto the chain of `xla.apply_indexing`s that compute its
    dimension operands, as far as each step's operands are all results of one other
    `xla.apply_indexing` (an operand's index map applied to the loop's multi-result map, as the
    elemental emitter writes a broadcast's read; a gather's row read through the reshapes between
    it and the loop), with the operands at the chain's start; None when there is nothing to fold.
    The access then reads as a function of the loop variables, which is what vectorize-loads-stores
    needs to see that it is contiguous in the vector index (XLA folds such chains in its
    apply_indexing canonicalization). Range and runtime variables (a gather's row index) are kept
    as operands."""
    m, operands = producer.map, list(producer.operands_)
    folded = None
    while (step := _fold_once(m, operands)) is not None:
        folded = m, operands = step
    return folded


def _fold_once(m: IndexingMap, operands: list[SSAValue]) -> tuple[IndexingMap, list[SSAValue]] | None:
    """One step of `_fold_chain`: `m` over `operands` composed onto the one `xla.apply_indexing`
    that computes every dimension operand it uses, or None."""
    nd, ns = len(m.dims), len(m.symbols)
    m, kept = m.remove_unused_dims()
    used = [operands[i] for i in kept]
    q = used[0].owner if used else None
    if not isinstance(q, ApplyIndexingOp) or any(v.owner is not q for v in used):
        return None
    qm, q_operands = q.map, list(q.operands_)
    qd, qs = len(qm.dims), len(qm.symbols)
    selected = IndexingMap(qm.dims, tuple(qm.results[v.index] for v in used), qm.symbols, qm.runtime,
                           qm.constraints, qm.known_empty)
    # compose's variables: q's dims, then m's symbols and q's, then m's runtime variables and q's
    new_operands = [*q_operands[:qd], *operands[nd:nd + ns], *q_operands[qd:qd + qs], *operands[nd + ns:],
                    *q_operands[qd + qs:]]
    return _composed(selected, m), new_operands


def flatten_atomic_rmw(module: ModuleOp) -> None:
    """Every `xla.atomic_rmw` gets one linear index, as a `tensor.insert` does; its body (which sees
    only the element) moves over unchanged. The tensor types change with the others below."""
    for o in walk_ops(module, AtomicRMWOp):
        shape = tensor_sizes(o.input.type)
        if len(shape) == 1:
            continue
        index = emit_linear_index(KernelBuilder(InsertPoint.before(o)), shape, list(o.indices))
        flat = AtomicRMWOp(o.input, [index], o.detach_region(o.body))
        flat.attributes |= o.attributes
        Rewriter.replace_op(o, flat)


@dataclass(frozen=True)
class FlattenTensorsPass(ModulePass):
    name = "flatten-tensors"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        flatten_atomic_rmw(op)
        # Accesses first: their shapes are read from the tensor types, which flattening a constant changes.
        for o in walk_ops(op, (tensor.ExtractOp, tensor.InsertOp)):
            shape = tensor_sizes(o.tensor.type if isinstance(o, tensor.ExtractOp) else o.dest.type)
            b = KernelBuilder(InsertPoint.before(o))
            index = emit_linear_index(b, shape, list(o.indices))
            if len(shape) == 1 and index is o.indices[0]:
                continue
            if isinstance(o, tensor.ExtractOp):
                new = tensor.ExtractOp(o.tensor, [index], o.result.type)
            else:
                new = tensor.InsertOp(o.scalar, o.dest, [index])
            Rewriter.replace_op(o, new)
        for o in walk_ops(op, arith.ConstantOp):
            if isinstance(o, arith.ConstantOp) and isinstance(o.value, DenseIntOrFPElementsAttr) \
                    and isinstance(o.result.type, TensorType):
                t = flat_type(o.result.type)
                if t != o.result.type:
                    values = o.value.get_values()
                    Rewriter.replace_op(o, arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(t, list(values)), t))
        for o in walk_ops(op):
            if isinstance(o, func.FuncOp):
                ft = o.function_type
                o.function_type = FunctionType.from_lists([flat_type(t) for t in ft.inputs],
                                                          [flat_type(t) for t in ft.outputs])
            for region in o.regions:
                for block in region.blocks:
                    for arg in list(block.args):
                        if flat_type(arg.type) != arg.type:
                            Rewriter.replace_value_with_new_type(arg, flat_type(arg.type))
            for result in list(o.results):
                if flat_type(result.type) != result.type:
                    Rewriter.replace_value_with_new_type(result, flat_type(result.type))
