"""`lower-tensors`: tensors become pointers (seed 000 "Conversion to LLVM"; XLA's lower_tensors.cc).

Kernel IR never bufferizes: every tensor value is a version of a buffer that a function argument
(or a constant) points to, updated in place (destination-passing style). So every tensor-typed
value — function arguments, loop-carried values, branch results — becomes an `!llvm.ptr`;
`tensor.extract`/`tensor.insert` become `llvm.getelementptr` + `llvm.load`/`llvm.store`, and
`vector.transfer_read`/`transfer_write` the same with a vector type (a masked one, from
`vectorize_masked_lanes`, the intrinsic `llvm.masked.load`/`llvm.masked.store`, whose masked-off lanes
touch no memory); the result of an insert or
write is its destination pointer; `xla.prefetch` becomes `llvm.call_intrinsic "llvm.prefetch.p0"`.
Dense tensor constants become private constant `llvm.mlir.global`s.
Function results that were tensors are dropped: the caller owns the buffers.

Block-shared memory: `xla.allocate_shared` becomes `xla.shared_memory <bytes>` (a pointer the LLVM
translation places: a buffer of the block on the CPU, an addrspace(3) global on a GPU) and
`xla.sync_threads` becomes `gpu.barrier`, its results the pointers it was given.

`xla.atomic_rmw` becomes `xla.atomic_update` of the element's pointer (same body): atomic on a
GPU, a plain load, body and store on the CPU where kernels using it run serially
(`KernelModule.serial`), see `_lower_atomic_rmw`.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, gpu, llvm, tensor, vector
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    FunctionType,
    IndexType,
    IntAttr,
    ModuleOp,
    TensorType,
    VectorType,
    i32,
    i64,
)
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from hlocc.codegen.context import KernelIRError
from hlocc.codegen.ir import AllocateSharedOp, AtomicRMWOp, AtomicUpdateOp, PrefetchOp, SharedMemoryOp, SyncThreadsOp
from hlocc.codegen.ir.builder import KernelBuilder, make_op, make_op_like
from hlocc.codegen.llvm.types import align, llvm_type, type_suffix
from hlocc.codegen.transforms.util import walk_ops

PTR = llvm.LLVMPointerType()


def _address(b: KernelBuilder, base: SSAValue, index: SSAValue, elem) -> SSAValue:
    # ops by template (builder.py `make_op`): xDSL's constructors were half of this pass's time
    if isinstance(index.type, IndexType):
        index = b.op(arith.IndexCastOp, index, i64)
    return b.add(make_op_like((llvm.GEPOp, "inbounds, one index", elem), [base, index], _gep, base, index, elem))


def _gep(base: SSAValue, index: SSAValue, elem) -> llvm.GEPOp:
    return llvm.GEPOp(base, [llvm.GEP_USE_SSA_VAL], elem, [index], inbounds=True)


def _lower_access(op: Operation) -> None:
    b = KernelBuilder(InsertPoint.before(op))
    if isinstance(op, tensor.ExtractOp):
        elem = op.result.type
        (index,) = op.indices
        p = _address(b, op.tensor, index, elem)
        Rewriter.replace_op(op, make_op(llvm.LoadOp, p, elem))
    elif isinstance(op, tensor.InsertOp):
        (index,) = op.indices
        p = _address(b, op.dest, index, op.scalar.type)
        b.insert(make_op(llvm.StoreOp, op.scalar, p))
        op.result.replace_all_uses_with(op.dest)
        Rewriter.erase_op(op)
    elif isinstance(op, vector.TransferReadOp):
        vtype = op.result.type
        (index,) = op.indices
        p = _address(b, op.source, index, vtype.element_type)
        if op.mask is None:
            Rewriter.replace_op(op, make_op(llvm.LoadOp, p, vtype))
            return
        passthru = b.add(vector.BroadcastOp(op.padding, vtype))
        Rewriter.replace_op(op, llvm.CallIntrinsicOp(_masked("load", vtype), [p, _align(b, vtype), op.mask, passthru],
                                                     [vtype]))
    elif isinstance(op, PrefetchOp):  # LLVM's prefetch(ptr, read, locality 3, data cache)
        p = _address(b, op.source, op.index, op.source.type.element_type)
        b.insert(llvm.CallIntrinsicOp("llvm.prefetch.p0", [p, b.constant(0, i32), b.constant(3, i32),
                                                            b.constant(1, i32)], []))
        Rewriter.erase_op(op)
    elif isinstance(op, vector.TransferWriteOp):
        (index,) = op.indices
        p = _address(b, op.source, index, op.vector.type.element_type)
        if op.mask is None:
            b.insert(make_op(llvm.StoreOp, op.vector, p))
        else:
            b.insert(llvm.CallIntrinsicOp(_masked("store", op.vector.type), [op.vector, p, _align(b, op.vector.type),
                                                                             op.mask], []))
        op.results[0].replace_all_uses_with(op.source)
        Rewriter.erase_op(op)


def _masked(kind: str, vtype: VectorType) -> str:
    """`llvm.masked.load.v16f32.p0` / `llvm.masked.store...`: a masked transfer's intrinsic, named by
    the LLVM type of its vector (bf16 and the f8 formats are integers there)."""
    return f"llvm.masked.{kind}.{type_suffix(llvm_type(vtype))}.p0"


def _align(b: KernelBuilder, vtype: VectorType) -> SSAValue:
    """The i32 alignment operand of a masked access: its elements' (a CPU vector access is
    element-aligned, llvm/memory_ops.py)."""
    return b.constant(align(llvm_type(vtype.element_type)), i32)


def _lower_shared(op: AllocateSharedOp | SyncThreadsOp) -> None:
    if isinstance(op, AllocateSharedOp):
        t = op.result.type
        Rewriter.replace_op(op, SharedMemoryOp(t.element_count() * _storage_bytes(t.element_type)))
        return
    Rewriter.insert_op(gpu.BarrierOp(), InsertPoint.before(op))
    for result, operand in zip(op.results_, op.operands_):
        result.replace_all_uses_with(operand)
    Rewriter.erase_op(op)


def _storage_bytes(t) -> int:
    from xdsl.dialects.builtin import ComplexType

    if isinstance(t, ComplexType):
        return 2 * _storage_bytes(t.element_type)
    width = t.width.data if hasattr(t, "width") else t.bitwidth
    return max(1, -(-width // 8))


def _lower_atomic_rmw(op: AtomicRMWOp) -> None:
    """`xla.atomic_rmw` → GEP + `xla.atomic_update` on the element's pointer, with the same body;
    the result is the input pointer. The LLVM translation makes the update atomic on a GPU; on the
    CPU it is a plain read-modify-write, correct because kernels containing `xla.atomic_rmw` are
    `KernelModule.serial` (their blocks run one after another, the threads of a block in sequence)."""
    current_type = op.body.block.args[0].type
    if current_type != op.input.type.element_type:
        raise KernelIRError(f"'{op.name}' on {current_type} (a packed vector update) is not lowered")
    b = KernelBuilder(InsertPoint.before(op))
    (index,) = op.indices
    p = _address(b, op.input, index, current_type)
    body = op.body
    op.detach_region(body)
    b.insert(AtomicUpdateOp(p, body))
    op.result.replace_all_uses_with(op.input)
    Rewriter.erase_op(op)


_ACCESSES = (tensor.ExtractOp, tensor.InsertOp, vector.TransferReadOp, vector.TransferWriteOp, PrefetchOp)


@dataclass(frozen=True)
class LowerTensorsPass(ModulePass):
    name = "lower-tensors"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for o in walk_ops(op, (*_ACCESSES, AllocateSharedOp, SyncThreadsOp)):
            if isinstance(o, _ACCESSES):
                _lower_access(o)
            elif isinstance(o, (AllocateSharedOp, SyncThreadsOp)):
                _lower_shared(o)
        for rmw in walk_ops(op, AtomicRMWOp):
            _lower_atomic_rmw(rmw)
        self._lower_constants(op)
        for o in walk_ops(op):
            for region in o.regions:
                for block in region.blocks:
                    for arg in list(block.args):
                        if isinstance(arg.type, TensorType):
                            Rewriter.replace_value_with_new_type(arg, PTR)
            for result in list(o.results):
                if isinstance(result.type, TensorType):
                    Rewriter.replace_value_with_new_type(result, PTR)
        for f in [o for o in op.ops if isinstance(o, func.FuncOp)]:
            ft = f.function_type
            inputs = [PTR if isinstance(t, TensorType) else t for t in ft.inputs]
            outputs = [t for t in ft.outputs if not isinstance(t, TensorType)]
            keep = [i for i, t in enumerate(ft.outputs) if not isinstance(t, TensorType)]
            f.function_type = FunctionType.from_lists(inputs, outputs)
            for ret in walk_ops(f, func.ReturnOp):
                Rewriter.replace_op(ret, func.ReturnOp(*[ret.operands[i] for i in keep]))

    @staticmethod
    def _lower_constants(module: ModuleOp) -> None:
        count = 0
        for o in walk_ops(module, arith.ConstantOp):
            if isinstance(o.result.type, TensorType):
                assert isinstance(o.value, DenseIntOrFPElementsAttr)
                name = f"constant_{count}"
                count += 1
                t = o.result.type
                glob = llvm.GlobalOp(llvm.LLVMArrayType(IntAttr(t.element_count()), t.element_type), name, "private",
                                     constant=True, value=o.value)
                module.body.block.add_op(glob)
                Rewriter.replace_op(o, llvm.AddressOfOp(name, PTR))
