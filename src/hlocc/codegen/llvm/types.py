"""LLVM types and constants of kernel IR types, intrinsic declarations, and the translator's error."""

from __future__ import annotations

from collections.abc import Sequence

from llvmlite import ir
from xdsl.dialects import llvm
from xdsl.dialects.builtin import (
    AnyFloat,
    BFloat16Type,
    ComplexType,
    DenseIntOrFPElementsAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    VectorType,
)
from xdsl.ir import Attribute

from hlocc.errors import HloError

I64 = ir.IntType(64)


class TranslationError(HloError):
    """Kernel IR the LLVM translator cannot handle (an op or type no lowering pass removed)."""


def llvm_type(t: Attribute) -> ir.Type:
    if isinstance(t, IndexType):
        return I64
    if isinstance(t, IntegerType):
        return ir.IntType(t.width.data)
    if isinstance(t, Float32Type):
        return ir.FloatType()
    if isinstance(t, Float64Type):
        return ir.DoubleType()
    if isinstance(t, Float16Type):
        return ir.HalfType()
    if isinstance(t, BFloat16Type):
        # Storage only: LLVM's own bfloat lowering aborts the process on some x86 hosts (scalar
        # bfloat loads/stores in SelectionDAG), so lower-narrow-floats does all bf16 arithmetic.
        return ir.IntType(16)
    if isinstance(t, AnyFloat) and t.bitwidth <= 8:
        return ir.IntType(t.bitwidth)  # f8 in an i8; f4E2M1FN in an i4 (stored one per byte, as an i8)
    if isinstance(t, ComplexType):
        part = llvm_type(t.element_type)
        return ir.LiteralStructType([part, part])
    if isinstance(t, VectorType):
        return ir.VectorType(llvm_type(t.element_type), t.get_shape()[0])
    if isinstance(t, llvm.LLVMPointerType):
        return ir.PointerType()
    if isinstance(t, llvm.LLVMArrayType):
        return ir.ArrayType(llvm_type(t.type), t.size.data)
    raise TranslationError(f"cannot translate type {t} to LLVM")


def is_float(t: Attribute) -> bool:
    if isinstance(t, VectorType):
        t = t.element_type
    return isinstance(t, AnyFloat)


def type_suffix(t: ir.Type) -> str:
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{type_suffix(t.element)}"
    if isinstance(t, ir.IntType):
        return f"i{t.width}"
    return {ir.HalfType: "f16", ir.FloatType: "f32", ir.DoubleType: "f64"}[type(t)]


def declare_function(module: ir.Module, name: str, ret: ir.Type, args: Sequence[ir.Type]) -> ir.Function:
    """The module's declaration of the external function or intrinsic `name`, added at first use
    (malloc, llvm.memcpy.p0.p0.i64, llvm.nvvm.barrier0, ...)."""
    return module.globals.get(name) or ir.Function(module, ir.FunctionType(ret, list(args)), name=name)


def declare_intrinsic(module: ir.Module, name: str, overload: ir.Type, args: Sequence[ir.Type] | None = None,
                      ret: ir.Type | None = None) -> ir.Function:
    """`name.<suffix of overload>`, e.g. llvm.fabs.v16f32 (llvmlite's own helper knows no vectors)."""
    full = f"{name}.{type_suffix(overload)}"
    existing = module.globals.get(full)
    if existing is not None:
        return existing
    n_args = {"llvm.fma": 3, "llvm.copysign": 2, "llvm.pow": 2, "llvm.atan2": 2, "llvm.maximum": 2,
              "llvm.minimum": 2, "llvm.maxnum": 2, "llvm.minnum": 2}.get(name, 1)
    fnty = ir.FunctionType(ret or overload, list(args) if args is not None else [overload] * n_args)
    return ir.Function(module, fnty, name=full)


def constant_value(value: Attribute, t: Attribute) -> ir.Constant:
    ty = llvm_type(t)
    if isinstance(value, IntegerAttr):
        return ir.Constant(ty, value.value.data)
    if isinstance(value, FloatAttr):
        return float_constant(ty, value.value.data, t)
    if isinstance(value, DenseIntOrFPElementsAttr):
        elem_t = value.get_element_type()
        elem_ty = llvm_type(elem_t)
        values = list(value.get_values())
        n = ty.count if isinstance(ty, ir.VectorType) else ty.count
        if len(values) == 1 and n != 1:
            values = values * n
        elems = [float_constant(elem_ty, x, elem_t) if is_float(elem_t) else ir.Constant(elem_ty, int(x))
                 for x in values]
        return ir.Constant(ty, elems)
    raise TranslationError(f"cannot translate constant {value}")


def float_constant(ty: ir.Type, x: float, t: Attribute) -> ir.Constant:
    if isinstance(ty, ir.IntType):  # bf16 storage (lower-narrow-floats turns f8 constants into integers)
        import ml_dtypes
        import numpy as np

        if isinstance(t, BFloat16Type):
            return ir.Constant(ty, int(np.array(x, dtype=ml_dtypes.bfloat16).view(np.uint16)))
        raise TranslationError(f"cannot translate a {t} constant")
    return ir.Constant(ty, x)


def bit_width(ty: ir.Type) -> int:
    if isinstance(ty, ir.IntType):
        return ty.width
    return {ir.HalfType: 16, ir.FloatType: 32, ir.DoubleType: 64}[type(ty)]


def align(ty: ir.Type) -> int:
    """Element alignment: vectors are only as aligned as their elements (buffers are 64-byte
    aligned, but a vector access is at an element offset that is merely a multiple of its size),
    complex numbers as their parts (numpy aligns complex64 to 4 bytes)."""
    if isinstance(ty, ir.VectorType):
        ty = ty.element
    if isinstance(ty, ir.LiteralStructType):
        ty = ty.elements[0]
    if isinstance(ty, ir.IntType):
        return max(1, ty.width // 8)
    return {ir.HalfType: 2, ir.FloatType: 4, ir.DoubleType: 8}.get(type(ty), 1)
