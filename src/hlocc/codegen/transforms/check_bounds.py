"""`check-bounds`: every load and store of a kernel checked against its buffer (the bounds-checked
kernel mode, `hlocc.compile(..., check_bounds=True)` / `hlocc run --check-bounds`).

It runs just before `lower-tensors`, when every access is a `tensor.extract`/`tensor.insert` or a
`vector.transfer_read`/`transfer_write` at one linear index into a 1-D tensor (of static size, or
of a symbolic size that the check computes from the kernel's dimension variables). For
each access at index i of `lanes` elements (1, or the vector's) into a buffer of n elements:

    ok   = 0 <= i && i + lanes <= n
    i'   = ok ? i : 0                     the access itself uses i' (nothing outside is touched)
    slot = ok ? 0 : 3 * (buffer + 2)      the buffer's record, or a scratch slot
    @hlocc_bounds[slot] = 1; [slot + 1] = i; [slot + 2] = n

with no branch (a store whose address is selected), so the kernel's control flow, vectorisation
and parallel blocks stay as they are. `buffer` is the function argument the tensor comes from
(traced through loop-carried values and the results of earlier stores), -1 when not found (a
constant). `@hlocc_bounds` is one external i64 array per kernel: slots 0-2 scratch, then one record
per buffer (-1, 0, 1, ...). The CPU kernel clears it before each launch and, after it, raises a
`BoundsCheckError` naming the kernel, the buffer and the index (backends/cpu/kernel.py).

A masked transfer (`vector.create_mask %k`, `vectorize_masked_lanes`) touches only its first
`min(max(k, 0), lanes)` lanes: those are checked (no lane kept: nothing to check), and a checked
access outside its buffer clears its mask instead of touching element 0.

The pass is only in the pipeline of a target with `check_bounds` (codegen/pipeline.py
`pipeline_for`): kernels compiled without it are unchanged and cost nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, llvm, scf, tensor, vector
from xdsl.dialects.builtin import IndexType, IntAttr, ModuleOp, TensorType, VectorType, i64
from xdsl.ir import Block, BlockArgument, Operation, OpResult, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint

from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.ir.mlir_types import tensor_num_elements
from hlocc.codegen.ir.size_ops import size_value
from hlocc.errors import HloError

GLOBAL = "hlocc_bounds"
RECORD = 3  # i64 slots per record: flag, index, size


class BoundsCheckError(HloError):
    """A bounds-checked kernel accessed an element outside one of its buffers."""


def record_slots(num_buffers: int) -> int:
    """Size of `@hlocc_bounds` for a kernel with `num_buffers` arguments."""
    return RECORD * (num_buffers + 2)


def _buffer_of(value: SSAValue) -> int:
    """The function argument `value` (a tensor) is a version of, or -1."""
    for _ in range(1000):
        if isinstance(value, BlockArgument):
            block: Block = value.block
            parent = block.parent_op()
            if isinstance(parent, func.FuncOp):
                return value.index
            if isinstance(parent, scf.ForOp) and value.index >= 1:
                value = parent.iter_args[value.index - 1]
                continue
            return -1
        if isinstance(value, OpResult):
            op = value.op
            if isinstance(op, tensor.InsertOp):
                value = op.dest
            elif isinstance(op, vector.TransferWriteOp):
                value = op.source
            elif isinstance(op, scf.ForOp):
                value = op.iter_args[value.index]
            elif isinstance(op, scf.IfOp):
                yielded = op.true_region.block.last_op
                value = yielded.operands[value.index] if yielded is not None else value
                if isinstance(value, OpResult) and value.op is op:
                    return -1
            else:
                return -1
            continue
        return -1
    return -1


def _access(op: Operation) -> tuple[SSAValue, int, int] | None:
    """(buffer tensor, operand position of the index, lanes) of an access op."""
    if isinstance(op, tensor.ExtractOp):
        return op.tensor, 1, 1
    if isinstance(op, tensor.InsertOp):
        return op.dest, 2, 1
    if isinstance(op, vector.TransferReadOp):
        return op.source, 1, _lanes(op.result.type)
    if isinstance(op, vector.TransferWriteOp):
        return op.source, 2, _lanes(op.vector.type)
    return None


def _lanes(t) -> int:
    return t.element_count() if isinstance(t, VectorType) else 1


def _check(op: Operation, buffer_value: SSAValue, position: int, lanes: int, table: SSAValue, table_type) -> None:
    t = buffer_value.type
    if not isinstance(t, TensorType) or len(op.operands) <= position:
        return
    buffer = _buffer_of(buffer_value)
    b = KernelBuilder(InsertPoint.before(op))
    index = op.operands[position]
    if not isinstance(index.type, IndexType):
        return
    count = tensor_num_elements(t)
    zero = b.index(0)
    mask = getattr(op, "mask", None)
    kept = mask.owner.mask_dim_sizes[0] if mask is not None and isinstance(mask.owner, vector.CreateMaskOp) else None
    if kept is not None:  # the lanes a mask keeps: [0, min(max(k, 0), lanes))
        kept = b.add(arith.MinSIOp(b.add(arith.MaxSIOp(kept, zero)), b.index(lanes)))
    above = b.cmpi("sge", index, zero)
    end = b.add(arith.AddiOp(index, b.index(lanes) if kept is None else kept))
    size = b.index(count) if isinstance(count, int) else size_value(b, count)  # symbolic: read at run time
    ok = b.and_([above, b.cmpi("sle", end, size)])
    if kept is not None:  # no lane kept: no access; outside: none either (the mask cleared)
        ok = b.op(arith.OrIOp, ok, b.cmpi("eq", kept, zero))
        cleared = b.add(vector.CreateMaskOp([b.select(ok, kept, zero)], mask.type))
        op.operands[len(op.operands) - 1] = cleared
    op.operands[position] = b.select(ok, index, zero)
    slot = b.select(ok, b.constant(0, i64), b.constant(RECORD * (buffer + 2), i64))
    recorded = b.constant(count, i64) if isinstance(count, int) else b.add(arith.IndexCastOp(size, i64))
    values = (b.constant(1, i64), b.add(arith.IndexCastOp(index, i64)), recorded)
    for k, value in enumerate(values):
        at = b.add(arith.AddiOp(slot, b.constant(k, i64))) if k else slot
        p = b.add(llvm.GEPOp(table, [0, llvm.GEP_USE_SSA_VAL], table_type, [at]))
        b.insert(llvm.StoreOp(value, p))


@dataclass(frozen=True)
class CheckBoundsPass(ModulePass):
    name = "check-bounds"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        functions = [f for f in op.ops if isinstance(f, func.FuncOp)]
        num_buffers = max((len(f.function_type.inputs) for f in functions), default=0)
        table_type = llvm.LLVMArrayType(IntAttr(record_slots(num_buffers)), i64)
        op.body.block.add_op(llvm.GlobalOp(table_type, GLOBAL, "external", constant=False))
        for f in functions:
            if f.body.blocks.first is None:
                continue
            entry = f.body.blocks.first
            address = llvm.AddressOfOp(GLOBAL, llvm.LLVMPointerType())
            entry.insert_op_before(address, entry.first_op) if entry.first_op else entry.add_op(address)
            for access in [o for o in f.walk() if _access(o) is not None]:
                _check(access, *_access(access), address.result, table_type)


__all__ = ["GLOBAL", "RECORD", "BoundsCheckError", "CheckBoundsPass", "record_slots"]
