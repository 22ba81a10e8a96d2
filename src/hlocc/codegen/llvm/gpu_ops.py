"""Translation of the parallel kernel model's ops for a GPU (NVPTX) or a CPU entry function: thread
and block ids, shared memory, barriers, warp shuffles and atomic updates. (On the CPU, functions
with shared memory, barriers or shuffles go through block_simulation.py instead.)"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir
from xdsl.dialects import arith, gpu
from xdsl.dialects.builtin import IntegerType
from xdsl.ir import Block, Operation, SSAValue

from hlocc.codegen.ir import (
    AtomicUpdateOp,
    CpAsyncCommitOp,
    CpAsyncOp,
    CpAsyncWaitOp,
    LdMatrixOp,
    MmaSyncOp,
    SharedMemoryOp,
    ShuffleReduceOp,
)
from hlocc.codegen.llvm.types import TranslationError, align, bit_width, declare_function, llvm_type

if TYPE_CHECKING:
    from hlocc.codegen.llvm.translator import FunctionTranslator


def _thread_or_block_id(ft: FunctionTranslator, op: Operation) -> None:
    ft.set(op, ft.ids["thread" if isinstance(op, gpu.ThreadIdOp) else "block"])


DYNAMIC_SHARED_SYMBOL = "hlocc_dynamic_shared"


def _shared_memory(ft: FunctionTranslator, op: SharedMemoryOp) -> None:
    if ft.t.gpu:
        # A static addrspace(3) array of the block, or with `dynamic_shared` a slice (`shared_alignment`)
        # of the extern array the launch sizes; addressed through a generic pointer, which NVPTX's
        # address-space inference turns back into ld/st.shared.
        size = op.size.value.data
        if ft.t.dynamic_shared:
            if ft.t._dynamic_shared is None:
                g = ir.GlobalVariable(ft.t.module, ir.ArrayType(ir.IntType(8), 0), DYNAMIC_SHARED_SYMBOL,
                                      addrspace=3)
                g.linkage = "external"
                g.align = ft.t.shared_alignment
                ft.t._dynamic_shared = g
            alignment = ft.t.shared_alignment
            offset = -(-ft.t.shared_bytes // alignment) * alignment
            i32 = ir.IntType(32)
            slice_ = ft.t._dynamic_shared.gep([ir.Constant(i32, 0), ir.Constant(i32, offset)])
            ft.t.shared_bytes = offset + size
            ft.set(op, ft.b.addrspacecast(slice_, ir.PointerType()))
            return
        g = ir.GlobalVariable(ft.t.module, ir.ArrayType(ir.IntType(8), size),
                              ft.t.module.get_unique_name("shared"), addrspace=3)
        g.linkage = "internal"
        g.align = ft.t.shared_alignment
        g.initializer = ir.Constant(g.value_type, ir.Undefined)
        ft.t.shared_bytes += size
        ft.set(op, ft.b.addrspacecast(g, ir.PointerType()))
        return
    if op not in ft.shared:
        raise TranslationError(f"'{op.name}' outside the top level of a kernel's entry function "
                               f"(@{ft.fn.sym_name.data})")
    ft.set(op, ft.shared[op])


def _barrier(ft: FunctionTranslator, op: gpu.BarrierOp) -> None:
    if not ft.t.gpu:
        raise TranslationError(f"'{op.name}' outside the top level of a kernel's entry function "
                               f"(@{ft.fn.sym_name.data}) cannot run on the CPU")
    fn = _intrinsic(ft, "llvm.nvvm.barrier0", ir.VoidType(), [])
    ft.b.call(fn, [])


def _shuffle_reduce(ft: FunctionTranslator, op: ShuffleReduceOp) -> None:
    """On a GPU: for distance = max_distance, ..., 1, each value is exchanged with lane ^ distance
    by `shfl.sync.bfly` (in 32-bit pieces) and the combiner called as (own, other)."""
    if not ft.t.gpu:
        raise TranslationError(f"'{op.name}' outside the top level of a kernel's entry function "
                               f"(@{ft.fn.sym_name.data}) cannot run on the CPU")
    combiner = ft.t.functions[op.combiner.root_reference.data]
    values = [ft.v(x) for x in op.operands]
    distance = op.max_distance.value.data
    while distance >= 1:
        others = [_shuffle_xor(ft, v, distance) for v in values]
        result = ft.b.call(combiner, values + others)
        values = [result] if len(values) == 1 else [ft.b.extract_value(result, k) for k in range(len(values))]
        distance //= 2
    for r, v in zip(op.results, values):
        ft.values[r] = v


def _shuffle_xor(ft: FunctionTranslator, value: ir.Value, distance: int) -> ir.Value:
    """The `value` of lane ^ distance: the value taken apart into i32 words, each shuffled."""
    b = ft.b
    i32 = ir.IntType(32)
    ty = value.type
    if isinstance(ty, (ir.VectorType, ir.LiteralStructType)):
        n = ty.count if isinstance(ty, ir.VectorType) else len(ty.elements)
        out = ir.Constant(ty, ir.Undefined)
        for k in range(n):
            part = (b.extract_element(value, ir.Constant(i32, k)) if isinstance(ty, ir.VectorType)
                    else b.extract_value(value, k))
            moved = _shuffle_xor(ft, part, distance)
            out = (b.insert_element(out, moved, ir.Constant(i32, k)) if isinstance(ty, ir.VectorType)
                   else b.insert_value(out, moved, k))
        return out
    bits = bit_width(ty)
    as_int = value if isinstance(ty, ir.IntType) else b.bitcast(value, ir.IntType(bits))
    shfl = _intrinsic(ft, "llvm.nvvm.shfl.sync.bfly.i32", i32, [i32] * 4)
    words = []
    for w in range(max(1, -(-bits // 32))):
        word = b.lshr(as_int, ir.Constant(as_int.type, 32 * w)) if w else as_int
        word = b.trunc(word, i32) if bits > 32 else b.zext(word, i32) if bits < 32 else word
        words.append(b.call(shfl, [ir.Constant(i32, ft.t.lane_mask), word, ir.Constant(i32, distance),
                                   ir.Constant(i32, 31)]))
    if bits < 32:
        result = b.trunc(words[0], ir.IntType(bits))
    elif bits == 32:
        result = words[0]
    else:
        wide = ir.IntType(bits)
        result = ir.Constant(wide, 0)
        for w, word in enumerate(words):
            result = b.or_(result, b.shl(b.zext(word, wide), ir.Constant(wide, 32 * w)))
    return result if isinstance(ty, ir.IntType) else b.bitcast(result, ty)


def _atomic_update(ft: FunctionTranslator, op: AtomicUpdateOp) -> None:
    """On the CPU, load, body, store (the kernel runs serially). On a GPU, `atomicrmw` when the body
    is one add (or integer min/max) of the current value and a value defined outside; otherwise a
    compare-and-swap loop on the element's bits (LLVM widens 8- and 16-bit ones to a masked 32-bit
    CAS)."""
    b = ft.b
    ptr = ft.v(op.ptr)
    block = op.body.block
    ty = llvm_type(block.args[0].type)
    if not ft.t.gpu:
        ft.values[block.args[0]] = b.load(ptr, typ=ty, align=align(ty))
        b.store(ft.block(block)[0], ptr, align=align(ty))
        return
    rmw = _single_rmw(block)
    if rmw is not None:
        kind, operand = rmw
        b.atomic_rmw(kind, ptr, ft.v(operand), "monotonic")
        return
    if isinstance(ty, ir.LiteralStructType) or bit_width(ty) not in (8, 16, 32, 64):
        raise TranslationError(f"'{op.name}' on {block.args[0].type} has no atomic form on a GPU")
    bits = ir.IntType(bit_width(ty))
    entry = b.block
    initial = b.load(ptr, typ=ty, align=align(ty))
    loop = ft.llfn.append_basic_block("cas.loop")
    done = ft.llfn.append_basic_block("cas.done")
    b.branch(loop)
    b.position_at_end(loop)
    current = b.phi(ty, "current")
    current.add_incoming(initial, entry)
    ft.values[block.args[0]] = current
    new = ft.block(block)[0]
    expected = current if ty == bits else b.bitcast(current, bits)
    desired = new if ty == bits else b.bitcast(new, bits)
    pair = b.cmpxchg(ptr, expected, desired, "monotonic", "monotonic")
    seen = b.extract_value(pair, 0)
    current.add_incoming(seen if ty == bits else b.bitcast(seen, ty), b.block)
    b.cbranch(b.extract_value(pair, 1), done, loop)
    b.position_at_end(done)


_ATOMIC_KINDS = {arith.AddfOp: "fadd", arith.AddiOp: "add", arith.MaxSIOp: "max", arith.MinSIOp: "min",
                 arith.MaxUIOp: "umax", arith.MinUIOp: "umin"}


def _single_rmw(block: Block) -> tuple[str, SSAValue] | None:
    """(atomicrmw kind, the other operand) when `block` is `yield(op(current, x))` (or op(x,
    current)) for an op with an exact atomic form and x defined outside the body."""
    ops = list(block.ops)
    if len(ops) != 2 or type(ops[0]) not in _ATOMIC_KINDS or ops[1].operands[0] is not ops[0].results[0]:
        return None
    current = block.args[0]
    lhs, rhs = ops[0].operands
    other = rhs if lhs is current else lhs if rhs is current else None
    if other is None or other is current or other.owner is ops[0]:
        return None
    if isinstance(current.type, IntegerType) and current.type.width.data < 32 and ops[0].name != "arith.addi":
        return None  # NVPTX has no 8/16-bit atomic min/max: leave it to the CAS loop
    return _ATOMIC_KINDS[type(ops[0])], other


def _intrinsic(ft: FunctionTranslator, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    return declare_function(ft.t.module, name, ret, args)


def _warp_only(ft: FunctionTranslator, op: Operation) -> None:
    if not ft.t.gpu:
        raise TranslationError(f"'{op.name}' outside the top level of a kernel's entry function "
                               f"(@{ft.fn.sym_name.data}) cannot run on the CPU")


def _ldmatrix(ft: FunctionTranslator, op: LdMatrixOp) -> None:
    """`llvm.nvvm.ldmatrix.sync.aligned.m8n8.x{count}[.trans].b16` on the lane's row address, made a
    shared-memory pointer (the source is an `xla.shared_memory`)."""
    _warp_only(ft, op)
    b = ft.b
    i32 = ir.IntType(32)
    count = op.count.value.data
    address = b.gep(ft.v(op.source), [ft.v(op.index)], inbounds=True, source_etype=ir.IntType(16))
    shared = b.addrspacecast(address, ir.PointerType(addrspace=3))
    ret = i32 if count == 1 else ir.LiteralStructType([i32] * count)
    name = f"llvm.nvvm.ldmatrix.sync.aligned.m8n8.x{count}{'.trans' if op.trans is not None else ''}.b16"
    words = b.call(_intrinsic(ft, name, ret, [shared.type]), [shared])
    out = ir.Constant(ir.VectorType(i32, count), ir.Undefined)
    for j in range(count):
        word = words if count == 1 else b.extract_value(words, j)
        out = b.insert_element(out, word, ir.Constant(i32, j))
    ft.set(op, out)


def _mma_sync(ft: FunctionTranslator, op: MmaSyncOp) -> None:
    """`llvm.nvvm.mma.m16n8k16.row.col.bf16` (i32 words) or `....row.col.f32.f32` (f16 pairs as
    <2 x half>): NVVM names bf16 mma by the operand type and f16 mma by the D and C types."""
    _warp_only(ft, op)
    b = ft.b
    i32, f32 = ir.IntType(32), ir.FloatType()
    bf16 = op.element.data == "bf16"
    word = i32 if bf16 else ir.VectorType(ir.HalfType(), 2)

    def words(vector: ir.Value, n: int) -> list[ir.Value]:
        parts = [b.extract_element(vector, ir.Constant(i32, j)) for j in range(n)]
        return parts if bf16 else [b.bitcast(p, word) for p in parts]

    c = ft.v(op.c)
    args = [*words(ft.v(op.a), 4), *words(ft.v(op.b), 2),
            *(b.extract_element(c, ir.Constant(i32, j)) for j in range(4))]
    name = "llvm.nvvm.mma.m16n8k16.row.col." + ("bf16" if bf16 else "f32.f32")
    d = b.call(_intrinsic(ft, name, ir.LiteralStructType([f32] * 4), [a.type for a in args]), args)
    out = ir.Constant(ir.VectorType(f32, 4), ir.Undefined)
    for j in range(4):
        out = b.insert_element(out, b.extract_value(d, j), ir.Constant(i32, j))
    ft.set(op, out)


def _cp_async(ft: FunctionTranslator, op: CpAsyncOp) -> None:
    """On a GPU `llvm.nvvm.cp.async.cg.shared.global.16.s` (src_size 16, or 0: zero-fill); on the
    CPU an immediate copy of the 16 bytes, or zeros."""
    b = ft.b
    i16 = ir.IntType(16)
    dst = b.gep(ft.v(op.dst), [ft.v(op.dst_index)], inbounds=True, source_etype=i16)
    src = b.gep(ft.v(op.src), [ft.v(op.src_index)], inbounds=True, source_etype=i16)
    valid = ft.v(op.valid)
    ft.set(op, ft.v(op.dst))
    if ft.t.gpu:
        i32 = ir.IntType(32)
        shared, global_ = ir.PointerType(addrspace=3), ir.PointerType(addrspace=1)
        fn = _intrinsic(ft, "llvm.nvvm.cp.async.cg.shared.global.16.s", ir.VoidType(), [shared, global_, i32])
        b.call(fn, [b.addrspacecast(dst, shared), b.addrspacecast(src, global_),
                    b.select(valid, ir.Constant(i32, 16), ir.Constant(i32, 0))])
        return
    chunk = ir.VectorType(i16, 8)
    b.store(b.select(valid, b.load(src, typ=chunk, align=2), ir.Constant(chunk, None)), dst, align=2)


def _cp_async_commit(ft: FunctionTranslator, op: CpAsyncCommitOp) -> None:
    if ft.t.gpu:
        b = ft.b
        b.call(_intrinsic(ft, "llvm.nvvm.cp.async.commit.group", ir.VoidType(), []), [])


def _cp_async_wait(ft: FunctionTranslator, op: CpAsyncWaitOp) -> None:
    for r, v in zip(op.results, op.operands):
        ft.values[r] = ft.v(v)
    if ft.t.gpu:
        i32 = ir.IntType(32)
        fn = _intrinsic(ft, "llvm.nvvm.cp.async.wait.group", ir.VoidType(), [i32])
        ft.b.call(fn, [ir.Constant(i32, op.pending.value.data)])


GPU_HANDLERS = {
    gpu.ThreadIdOp: _thread_or_block_id, gpu.BlockIdOp: _thread_or_block_id, SharedMemoryOp: _shared_memory,
    gpu.BarrierOp: _barrier, ShuffleReduceOp: _shuffle_reduce, AtomicUpdateOp: _atomic_update,
    LdMatrixOp: _ldmatrix, MmaSyncOp: _mma_sync, CpAsyncOp: _cp_async, CpAsyncCommitOp: _cp_async_commit,
    CpAsyncWaitOp: _cp_async_wait,
}
