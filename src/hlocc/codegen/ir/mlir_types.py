"""HLO element types and shapes as MLIR types, as XLA's emitters spell them.

Integers are signless (`s32` and `u32` are both `i32`; the HLO type says how to interpret them),
pred is `i1`, the narrow floats are MLIR's `bf16`, `f16` and `f8E4M3FN`-style types, complex is
`complex<fN>`. A shape is a `tensor<...>` of its logical dimensions (the layout is applied by the
emitter through indexing maps, and by `flatten-tensors`).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import builtin as B
from xdsl.ir import Attribute

from hlocc.errors import UnsupportedError
from hlocc.hlo.symbolic import Dim, DimExpr, parse_dim_expr
from hlocc.hlo.types import PrimitiveType, Shape

_FLOAT_TYPES: dict[str, Attribute] = {
    "bf16": B.BFloat16Type(), "f16": B.Float16Type(), "f32": B.Float32Type(), "f64": B.Float64Type(),
    "f8e5m2": B.Float8E5M2Type(), "f8e4m3": B.Float8E4M3Type(), "f8e4m3fn": B.Float8E4M3FNType(),
    "f8e4m3b11fnuz": B.Float8E4M3B11FNUZType(), "f8e3m4": B.Float8E3M4Type(),
    "f8e5m2fnuz": B.Float8E5M2FNUZType(), "f8e4m3fnuz": B.Float8E4M3FNUZType(),
    "f4e2m1fn": B.Float4E2M1FNType(), "f8e8m0fnu": B.Float8E8M0FNUType(),
}


def sized_tensor_type(elem: Attribute, dims: Sequence[Dim]) -> B.TensorType:
    """`tensor<dims x elem>`; a symbolic dimension is `?`, and then the type's encoding lists every
    dimension's size as text (`tensor<?x128xf32, ["b", "128"]>`), so passes that linearise an
    access (flatten-tensors) or check it (check-bounds) know the sizes they compute at run time."""
    if not any(isinstance(d, DimExpr) for d in dims):
        return B.TensorType(elem, [int(d) for d in dims])
    shape = [B.DYNAMIC_INDEX if isinstance(d, DimExpr) else int(d) for d in dims]
    return B.TensorType(elem, shape, B.ArrayAttr([B.StringAttr(str(d).replace(" ", "")) for d in dims]))


def tensor_sizes(t: B.TensorType) -> tuple[Dim, ...]:
    """The sizes of a tensor type's dimensions: ints, or DimExprs for its symbolic dimensions."""
    encoding = t.encoding
    if isinstance(encoding, B.ArrayAttr) and len(encoding.data) == len(t.get_shape()):
        return tuple(parse_dim_expr(s.data) for s in encoding.data)
    return tuple(t.get_shape())


def tensor_num_elements(t: B.TensorType) -> Dim:
    n: Dim = 1
    for d in tensor_sizes(t):
        n = n * d
    return n


def element_type(pt: PrimitiveType) -> Attribute:
    """The MLIR type of one element of `pt`."""
    if pt.is_pred:
        return B.i1
    if pt.is_integer:
        return B.IntegerType(pt.bits)
    if pt.name in _FLOAT_TYPES:
        return _FLOAT_TYPES[pt.name]
    if pt.name == "c64":
        return B.ComplexType(B.Float32Type())
    if pt.name == "c128":
        return B.ComplexType(B.Float64Type())
    raise UnsupportedError(f"unsupported: element type {pt.name} in kernels")


def storage_type(pt: PrimitiveType) -> Attribute:
    """How an element is stored in a buffer: sub-byte types (s2, s4, u2, u4 and f4e2m1fn) take one
    byte each, the value's bits in the low bits and zeros above (ml_dtypes' layout); everything else
    as `element_type` (complex numbers as `complex<fN>`, the real part first)."""
    if (pt.is_integer or pt.is_float) and not pt.is_pred and pt.bits < 8:
        return B.IntegerType(8)
    return element_type(pt)


def mlir_element_type(pt: PrimitiveType) -> str:
    """The MLIR spelling of `element_type(pt)`, e.g. `i32`, `bf16`, `f8E4M3FN`, `complex<f32>`."""
    return str(element_type(pt))


def tensor_type(shape: Shape) -> B.TensorType:
    """`tensor<d0x...xT>` of an array shape's logical dimensions (T the storage type)."""
    return B.TensorType(storage_type(shape.element_type), list(shape.dims))
