"""Translation of the `llvm` memory ops `lower-tensors` leaves (getelementptr, load, store,
addressof) to LLVM instructions, with their alignment."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir
from xdsl.dialects import llvm

from hlocc.codegen.llvm.types import align, llvm_type

if TYPE_CHECKING:
    from hlocc.codegen.llvm.translator import FunctionTranslator


def _gep(ft: FunctionTranslator, op: llvm.GEPOp) -> None:
    elem = llvm_type(op.elem_type)
    ssa = iter(op.ssa_indices)
    indices = [ft.v(next(ssa)) if c == llvm.GEP_USE_SSA_VAL else ir.Constant(ir.IntType(32), c)
               for c in op.rawConstantIndices.get_values()]
    if len(indices) > 1:  # into an aggregate (check-bounds' record): llvmlite types it from the pointer
        ft.set(op, ft.b.gep(ft.v(op.ptr), indices, inbounds=op.inbounds is not None))
        return
    ft.set(op, ft.b.gep(ft.v(op.ptr), indices, inbounds=op.inbounds is not None, source_etype=elem))


def _load(ft: FunctionTranslator, op: llvm.LoadOp) -> None:
    ty = llvm_type(op.dereferenced_value.type)
    ft.set(op, ft.b.load(ft.v(op.ptr), typ=ty, align=_access_align(ft, ty)))


def _store(ft: FunctionTranslator, op: llvm.StoreOp) -> None:
    value = ft.v(op.value)
    ft.b.store(value, ft.v(op.ptr), align=_access_align(ft, value.type))


def _access_align(ft: FunctionTranslator, ty: ir.Type) -> int:
    """On a GPU a vector access is aligned to its size (up to 16 bytes): vectorize-loads-stores only
    makes vectors at element offsets that are multiples of their length, and the runtime aligns
    every buffer to 16 bytes (backends/cuda/ptx.py BUFFER_ALIGNMENT). That is what lets NVPTX emit
    ld.global.v4. Elsewhere (CPU callers may pass any numpy array) elements' alignment."""
    if ft.t.gpu and isinstance(ty, ir.VectorType):
        size = ty.count * align(ty)
        if size & (size - 1) == 0:
            return min(16, size)
    return align(ty)


def _address_of(ft: FunctionTranslator, op: llvm.AddressOfOp) -> None:
    ft.set(op, ft.t.globals[op.global_name.root_reference.data])


MEMORY_HANDLERS = {llvm.GEPOp: _gep, llvm.LoadOp: _load, llvm.StoreOp: _store, llvm.AddressOfOp: _address_of}
