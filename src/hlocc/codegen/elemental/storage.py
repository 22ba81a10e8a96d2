"""HLO shapes as kernel tensors: tensors hold elements in physical (major-to-minor) order and in their
storage type (pred as i8 bytes); loading and storing an element converts between storage and compute
types."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import arith, tensor
from xdsl.dialects.builtin import IntegerType, TensorType
from xdsl.ir import Attribute, SSAValue

from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.ir.mlir_types import element_type, sized_tensor_type, storage_type
from hlocc.hlo.types import PrimitiveType, Shape


def physical_indices(shape: Shape, logical: Sequence[SSAValue]) -> list[SSAValue]:
    return [logical[d] for d in reversed(shape.minor_to_major)]


def buffer_element_type(pt: PrimitiveType) -> Attribute:
    """The element type of a kernel's tensors: `storage_type`, and i8 for pred, whose buffers hold a
    byte (0 or 1) per element; an i1 tensor would become LLVM `<N x i1>` loads and stores once
    vectorized, which are bit-packed in memory."""
    return IntegerType(8) if pt.is_pred else storage_type(pt)


def physical_tensor_type(shape: Shape) -> TensorType:
    return sized_tensor_type(buffer_element_type(shape.element_type), shape.physical_dims)


def from_storage(b: KernelBuilder, stored: SSAValue, pt: PrimitiveType) -> SSAValue:
    """An element of type `pt` from its `buffer_element_type` value (or from the i8 bits of an f8/f4
    constant): a byte holding a pred or a sub-byte integer is truncated to its width; a sub-byte
    float (f4e2m1fn) is truncated to its bits; floats are bitcast."""
    ty = element_type(pt)
    if stored.type == ty:
        return stored
    if pt.is_float:
        if pt.bits < 8:
            stored = b.op(arith.TruncIOp, stored, IntegerType(pt.bits))
        return b.op(arith.BitcastOp, stored, ty)
    return b.op(arith.TruncIOp, stored, ty)


def to_storage(b: KernelBuilder, value: SSAValue, pt: PrimitiveType) -> SSAValue:
    """`from_storage` reversed: the bits zero-extended to the stored byte."""
    stored = buffer_element_type(pt)
    if value.type == stored:
        return value
    if pt.is_float:
        value = b.op(arith.BitcastOp, value, IntegerType(pt.bits))
    return b.op(arith.ExtUIOp, value, stored)


def load_element(b: KernelBuilder, t: SSAValue, shape: Shape, logical: Sequence[SSAValue]) -> SSAValue:
    """tensor.extract of the element at logical indices, converted from its storage type."""
    pt = shape.element_type
    stored = b.add(tensor.ExtractOp(t, physical_indices(shape, logical), buffer_element_type(pt)))
    return from_storage(b, stored, pt)


def store_element(b: KernelBuilder, value: SSAValue, t: SSAValue, shape: Shape,
                  logical: Sequence[SSAValue]) -> SSAValue:
    """tensor.insert of `value` at logical indices, converted to its storage type."""
    value = to_storage(b, value, shape.element_type)
    return b.add(tensor.InsertOp(value, t, physical_indices(shape, logical)))


def array_leaves(shape: Shape) -> list[Shape]:
    if not shape.is_tuple:
        return [shape]
    return [leaf for s in shape.tuple_shapes for leaf in array_leaves(s)]
