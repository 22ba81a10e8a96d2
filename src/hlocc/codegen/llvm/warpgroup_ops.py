"""Translation of the warpgroup (wgmma) ops of codegen/ir/warpgroup_ops.py for NVPTX (sm_90a, PTX
ISA 8.0) and, where they have one, their CPU form inside a block function.

NVVM intrinsics where LLVM 22 has them: `llvm.nvvm.wgmma.fence.sync.aligned`,
`llvm.nvvm.wgmma.commit_group.sync.aligned`, `llvm.nvvm.wgmma.wait_group.sync.aligned` and
`llvm.nvvm.fence.proxy.async.shared_cta`. LLVM 22 has no intrinsic for `wgmma.mma_async` (as
MLIR's NVVM dialect and Triton, it is inline PTX here): one `asm sideeffect` with the N/2 f32
accumulators as outputs tied to their inputs (`=f` ... `0`, `1`, ...) and the two descriptors as
`l` operands, scale-d 1, scale-a/b 1, trans-a/b 0 (K-major) or 1 (MN-major: `trans_a`/`trans_b`).
The accumulators stay readable only after a
wait_group: its results are the values passed through an empty `asm sideeffect` placed after the
intrinsic (each tied to itself), so LLVM cannot schedule a use of them above the wait (Triton ties
the wait's asm to the accumulators the same way).

On the CPU (the block simulation), a descriptor's address is the element's byte offset in the
block's shared-memory window (`FunctionTranslator.shared_window`: every shared buffer lies in
one 1024-byte aligned window, as shared memory does on a GPU), so the simulation
(warpgroup_simulation.py) decodes it exactly as a GPU would; the fences and the commit do nothing
and the wait passes its values through (a wgmma step completes before the next phase starts).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from hlocc.codegen.ir.warpgroup_ops import (
    SWIZZLE_MODES,
    FenceProxyAsyncOp,
    WgmmaCommitGroupOp,
    WgmmaDescriptorOp,
    WgmmaFenceOp,
    WgmmaMmaAsyncOp,
    WgmmaWaitGroupOp,
)
from hlocc.codegen.llvm.types import TranslationError, declare_function

if TYPE_CHECKING:
    from hlocc.codegen.llvm.translator import FunctionTranslator

I64 = ir.IntType(64)


def _call(ft: FunctionTranslator, name: str, args: list[ir.Value] = (), types: list[ir.Type] = ()) -> None:
    ft.b.call(declare_function(ft.t.module, name, ir.VoidType(), list(types)), list(args))


def _descriptor(ft: FunctionTranslator, op: WgmmaDescriptorOp) -> None:
    """(address & 0x3FFFF) >> 4 | LBO >> 4 << 16 | SBO >> 4 << 32 | mode << 62 (base offset 0)."""
    b = ft.b
    element = b.gep(ft.v(op.source), [ft.v(op.index)], inbounds=True, source_etype=ir.IntType(16))
    if ft.t.gpu:
        address = b.ptrtoint(b.addrspacecast(element, ir.PointerType(addrspace=3)), I64)
    elif ft.shared_window is not None:
        address = b.sub(b.ptrtoint(element, I64), b.ptrtoint(ft.shared_window, I64))
    else:
        raise TranslationError(f"'{op.name}' outside a kernel with shared memory (@{ft.fn.sym_name.data})")
    start = b.lshr(b.and_(address, ir.Constant(I64, 0x3FFFF)), ir.Constant(I64, 4))
    fields = ((op.lbo.value.data >> 4) << 16 | (op.sbo.value.data >> 4) << 32
              | SWIZZLE_MODES[op.swizzle.value.data] << 62)
    ft.set(op, b.or_(start, ir.Constant(I64, fields)))


def _fence_proxy_async(ft: FunctionTranslator, op: FenceProxyAsyncOp) -> None:
    if ft.t.gpu:
        _call(ft, "llvm.nvvm.fence.proxy.async.shared_cta")


def _wgmma_fence(ft: FunctionTranslator, op: WgmmaFenceOp) -> None:
    if ft.t.gpu:
        _call(ft, "llvm.nvvm.wgmma.fence.sync.aligned")


def _wgmma_commit(ft: FunctionTranslator, op: WgmmaCommitGroupOp) -> None:
    if ft.t.gpu:
        _call(ft, "llvm.nvvm.wgmma.commit_group.sync.aligned")


def _elements(b: ir.IRBuilder, vector: ir.Value) -> list[ir.Value]:
    return [b.extract_element(vector, ir.Constant(ir.IntType(32), i)) for i in range(vector.type.count)]


def _tied_asm(b: ir.IRBuilder, text: str, values: list[ir.Value], extra: list[ir.Value], extra_constraints: list[str],
              memory: bool = False) -> list[ir.Value]:
    """`asm sideeffect text` with `values` as f32 outputs tied to themselves, `extra` inputs after;
    `memory`: it reads memory (a `~{memory}` clobber), which keeps the stores before it."""
    n = len(values)
    f32 = ir.FloatType()
    ret = ir.LiteralStructType([f32] * n)
    constraints = ",".join(["=f"] * n + extra_constraints + [str(i) for i in range(n)]
                           + (["~{memory}"] if memory else []))
    asm = ir.InlineAsm(ir.FunctionType(ret, [x.type for x in extra] + [f32] * n), text, constraints,
                       side_effect=True)
    result = b.call(asm, [*extra, *values])
    return [b.extract_value(result, i) for i in range(n)]


def _pack(b: ir.IRBuilder, parts: list[ir.Value], ty: ir.VectorType) -> ir.Value:
    out = ir.Constant(ty, ir.Undefined)
    for i, part in enumerate(parts):
        out = b.insert_element(out, part, ir.Constant(ir.IntType(32), i))
    return out


def _wgmma_mma_async(ft: FunctionTranslator, op: WgmmaMmaAsyncOp) -> None:
    if not ft.t.gpu:
        raise TranslationError(f"'{op.name}' outside the top level of a kernel's entry function "
                               f"(@{ft.fn.sym_name.data}) cannot run on the CPU")
    b = ft.b
    n = op.n.value.data
    element = op.element.data
    c = ft.v(op.c)
    registers = ", ".join(f"${i}" for i in range(n // 2))
    text = (f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{element}.{element} {{{registers}}}, ${n // 2}, "
            f"${n // 2 + 1}, 1, 1, 1, {int(op.trans_a is not None)}, {int(op.trans_b is not None)};")
    # The operands are read through the descriptors' integer addresses, so the asm clobbers memory:
    # LLVM keeps (and orders before it) the shared-memory stores that staged them.
    d = _tied_asm(b, text, _elements(b, c), [ft.v(op.a_desc), ft.v(op.b_desc)], ["l", "l"], memory=True)
    ft.set(op, _pack(b, d, c.type))


def _wgmma_wait(ft: FunctionTranslator, op: WgmmaWaitGroupOp) -> None:
    if not ft.t.gpu:
        for r, v in zip(op.results, op.operands):
            ft.values[r] = ft.v(v)
        return
    b = ft.b
    _call(ft, "llvm.nvvm.wgmma.wait_group.sync.aligned", [ir.Constant(I64, op.pending.value.data)], [I64])
    for r, v in zip(op.results, op.operands):
        value = ft.v(v)
        ft.values[r] = _pack(b, _tied_asm(b, "", _elements(b, value), [], []), value.type)


WARPGROUP_HANDLERS = {
    WgmmaDescriptorOp: _descriptor, FenceProxyAsyncOp: _fence_proxy_async, WgmmaFenceOp: _wgmma_fence,
    WgmmaMmaAsyncOp: _wgmma_mma_async, WgmmaCommitGroupOp: _wgmma_commit, WgmmaWaitGroupOp: _wgmma_wait,
}

__all__ = ["WARPGROUP_HANDLERS"]
