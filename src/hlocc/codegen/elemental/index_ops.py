"""The index ops of elemental emission: ops whose value at an output index is an operand's value at
another index (broadcast, transpose, reshape, slice, pad, concatenate, dynamic-slice, gather, ...)
or a constant, iota, tuple or map; each registered in `INDEX_OPS`. Also the emission of scalar
computations (map and reduce bodies)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from xdsl.dialects import arith, tensor
from xdsl.dialects import complex as complex_dialect
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, IntegerType, TensorType, f64, i64
from xdsl.ir import SSAValue

from hlocc.analysis.op_indexing import output_to_input
from hlocc.codegen.elemental.ops import convert
from hlocc.codegen.elemental.registry import ELEMENTAL, emit_elementwise, register_index_op
from hlocc.codegen.elemental.storage import from_storage, load_element, physical_indices, physical_tensor_type
from hlocc.codegen.ir.builder import INDEX, KernelBuilder
from hlocc.codegen.ir.mlir_types import element_type
from hlocc.codegen.ir.size_ops import size_value
from hlocc.codegen.partitioner import operand_maps
from hlocc.errors import UnsupportedError
from hlocc.hlo.ir import HloComputation, HloInstruction
from hlocc.hlo.symbolic import DimExpr
from hlocc.hlo.types import PrimitiveType

if TYPE_CHECKING:
    from hlocc.codegen.elemental.element_emitter import ElementEmitter


@register_index_op("parameter")
def _parameter(e: ElementEmitter, instr: HloInstruction, indices):
    return [load_element(e.b, e.params[instr.parameter_number], instr.shape, indices)]


@register_index_op("constant")
def _constant(e: ElementEmitter, instr: HloInstruction, indices):
    literal = np.asarray(instr.literal)
    pt = instr.shape.element_type
    if literal.size == 1:
        return [scalar_constant(e.b, literal.reshape(()), pt)]
    # An array constant: a dense tensor constant read like a parameter (lowered to a global).
    data = np.transpose(literal, list(reversed(instr.shape.minor_to_major))) if literal.ndim else literal
    at = physical_indices(instr.shape, indices)
    if pt.is_complex:
        # Dense attributes hold no complex numbers: the parts, as a minor dimension of size 2.
        part = element_type(pt).element_type
        parts = np.stack([data.real, data.imag], axis=-1).astype(np.float64)
        ttype = TensorType(part, [*instr.shape.physical_dims, 2])
        t = e.b.add(arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(ttype, parts.reshape(-1).tolist()), ttype))
        re, im = (e.b.add(tensor.ExtractOp(t, [*at, e.b.index(k)], part)) for k in (0, 1))
        return [e.b.add(complex_dialect.CreateOp(re, im, element_type(pt)))]
    if pt.is_float and pt.bits <= 8:
        # f8/f4 values have no dense-attribute form the translator takes: their bits, as i8.
        bits = np.ascontiguousarray(np.asarray(data, dtype=pt.dtype)).view(np.uint8).astype(np.int64)
        bits = np.where(bits >= 128, bits - 256, bits)
        ttype = TensorType(IntegerType(8), instr.shape.physical_dims)
        t = e.b.add(arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(ttype, [int(v) for v in bits.reshape(-1)]),
                                     ttype))
        return [from_storage(e.b, e.b.add(tensor.ExtractOp(t, at, IntegerType(8))), pt)]
    ttype = physical_tensor_type(instr.shape)
    values = [_python_scalar(v) for v in data.reshape(-1)]
    if isinstance(ttype.element_type, IntegerType):
        # xDSL holds signless integers in the signed range (u64 max is -1).
        width = ttype.element_type.width.data
        values = [int(v) - (1 << width) if int(v) >= 1 << (width - 1) else int(v) for v in values]
    attr = DenseIntOrFPElementsAttr.from_list(ttype, values)
    t = e.b.op(arith.ConstantOp, attr, ttype)
    return [load_element(e.b, t, instr.shape, indices)]


def scalar_constant(b: KernelBuilder, value: np.ndarray, pt: PrimitiveType) -> SSAValue:
    """A 0-d literal of type `pt` as an SSA value (a complex number from two float constants)."""
    ty = element_type(pt)
    if pt.is_complex:
        z = complex(value)
        re, im = (b.constant(v, ty.element_type) for v in (z.real, z.imag))
        return b.add(complex_dialect.CreateOp(re, im, ty))
    return b.constant(_python_scalar(value), ty)


def _python_scalar(v) -> int | float | bool:
    v = np.asarray(v)
    if v.dtype == np.bool_:
        return bool(v)
    if np.issubdtype(v.dtype, np.integer):
        return int(v)
    return float(v.astype(np.float64))


@register_index_op("iota")
def _iota(e: ElementEmitter, instr: HloInstruction, indices):
    i = indices[int(instr.attrs["iota_dimension"])]
    pt = instr.shape.element_type
    as_int = e.b.op(arith.IndexCastOp, i, i64)
    from hlocc.hlo.types import PRIMITIVE_TYPES

    if pt.is_float or pt.is_complex:
        f = e.b.op(arith.SIToFPOp, as_int, f64)
        return [convert(e.b, f, PRIMITIVE_TYPES["f64"], pt)]
    return [convert(e.b, as_int, PRIMITIVE_TYPES["s64"], pt)]


@register_index_op("broadcast", "transpose", "reshape", "bitcast", "slice", "reverse", "copy")
def _data_movement(e: ElementEmitter, instr: HloInstruction, indices):
    value = e.operand_at(instr, 0, indices)
    src, dst = instr.operand(0).shape.element_type, instr.shape.element_type
    if src != dst:  # a bitcast may reinterpret the element type (same width)
        if src.is_complex or dst.is_complex:
            raise UnsupportedError(f"unsupported: {instr.opcode} from {src.name} to {dst.name} in a kernel "
                                   f"(instruction '{instr.name}')")
        value = e.b.op(arith.BitcastOp, value, element_type(dst))
    return [value]


@register_index_op("pad")
def _pad(e: ElementEmitter, instr: HloInstruction, indices):
    m = output_to_input(instr)[0]
    cond = e.in_bounds(m, indices, instr.shape.dims)
    pad_value = lambda: e.scalar(instr.operand(1), [])  # noqa: E731
    if cond is None:
        return [e.operand_at(instr, 0, indices)]
    ty = element_type(instr.shape.element_type)
    return [e.if_else(cond, lambda: e.operand_at(instr, 0, indices), pad_value, ty)]


@register_index_op("concatenate")
def _concatenate(e: ElementEmitter, instr: HloInstruction, indices):
    maps = output_to_input(instr)
    ty = element_type(instr.shape.element_type)

    def select_from(k: int) -> SSAValue:
        if k == len(maps) - 1:
            return e.operand_at(instr, k, indices)
        cond = e.in_bounds(maps[k], indices, instr.shape.dims)
        return e.if_else(cond, lambda: e.operand_at(instr, k, indices), lambda: select_from(k + 1), ty)

    return [select_from(0)]


def clamp_start(b: KernelBuilder, start: SSAValue, pt: PrimitiveType, hi: int | DimExpr) -> SSAValue:
    """A start index of integer type `pt` clamped to [0, hi], as index (XLA's dynamic-slice and
    gather semantics: the slice lies in bounds). Unsigned starts are zero-extended, so u64 starts of
    2^63 and more are large, not negative. A symbolic `hi` (runtime dims) is computed in the kernel."""
    wide = start if _width(start) == 64 else b.add((arith.ExtUIOp if pt.is_unsigned else arith.ExtSIOp)(start, i64))
    symbolic = isinstance(hi, DimExpr)
    if pt.is_unsigned:
        hi_wide = b.op(arith.IndexCastOp, size_value(b, hi), i64) if symbolic else b.constant(hi, i64)
        wide = b.op(arith.MinUIOp, wide, hi_wide)
    as_index = b.op(arith.IndexCastOp, wide, INDEX)
    hi_index = size_value(b, hi) if symbolic else b.index(hi)
    return b.op(arith.MaxSIOp, b.op(arith.MinSIOp, as_index, hi_index), b.index(0))


def _clamped_offsets(e: ElementEmitter, instr: HloInstruction, first: int, window: Sequence[int]) -> list[SSAValue]:
    """The scalar start operands from `first` on, clamped to [0, dim - window]."""
    operand = instr.operand(0).shape
    return [clamp_start(e.b, e.scalar(instr.operand(first + i), []), instr.operand(first + i).shape.element_type,
                        operand.dims[i] - size)
            for i, size in enumerate(window)]


def _width(v: SSAValue) -> int:
    return v.type.width.data if isinstance(v.type, IntegerType) else 0


@register_index_op("dynamic-slice")
def _dynamic_slice(e: ElementEmitter, instr: HloInstruction, indices):
    offsets = _clamped_offsets(e, instr, 1, instr.shape.dims)
    return [e.operand_at(instr, 0, indices, offsets)]


@register_index_op("gather")
def _gather(e: ElementEmitter, instr: HloInstruction, indices):
    """As XLA's loop emitter: the output's batch dims pick an index vector of the start indices;
    component k, clamped to its runtime variable's range [0, operand_dim - slice_size], is the start
    of operand dim start_index_map[k] (op_indexing's gather maps place it and add the offsets). The
    clamp's bound is computed in the kernel where the operand dim is symbolic."""
    data, vector = output_to_input(instr)
    start_indices = instr.operand(1)
    operand, sizes = instr.operand(0).shape.dims, instr.attrs["slice_sizes"]
    starts = []
    for k, d in enumerate(instr.attrs["start_index_map"]):
        at = e.apply(vector, indices, [e.b.index(k)] if vector.symbols else [])
        starts.append(clamp_start(e.b, e.scalar(start_indices, at), start_indices.shape.element_type,
                                  operand[d] - sizes[d]))
    return [e.operand_at(instr, 0, indices, starts)]


@register_index_op("dynamic-update-slice")
def _dynamic_update_slice(e: ElementEmitter, instr: HloInstruction, indices):
    update = instr.operand(1).shape
    offsets = _clamped_offsets(e, instr, 2, update.dims)
    m = output_to_input(instr)[1]
    cond = e.in_bounds(m, indices, instr.shape.dims, (), offsets)
    ty = element_type(instr.shape.element_type)
    return [e.if_else(cond, lambda: e.operand_at(instr, 1, indices, offsets),
                      lambda: e.operand_at(instr, 0, indices), ty)]


@register_index_op("tuple")
def _tuple(e: ElementEmitter, instr: HloInstruction, indices):
    values = []
    for op, m in zip(instr.operands, operand_maps(instr)):
        values += e.value(op, e.apply(m, indices))
    return values


@register_index_op("map")
def _map(e: ElementEmitter, instr: HloInstruction, indices):
    args = [e.scalar(op, indices) for op in instr.operands]
    return emit_scalar_computation(e.b, instr.to_apply, args)


def emit_scalar_computation(b: KernelBuilder, computation: HloComputation, args: Sequence[SSAValue]) -> list[SSAValue]:
    """Inline a scalar computation (a map or reduce body) on scalar arguments."""
    values: dict[int, list[SSAValue]] = {}
    for instr in computation.post_order():
        if instr.opcode == "parameter":
            values[id(instr)] = [args[instr.parameter_number]]
        elif instr.opcode == "constant":
            values[id(instr)] = [scalar_constant(b, np.asarray(instr.literal).reshape(()), instr.shape.element_type)]
        elif instr.opcode == "tuple":
            values[id(instr)] = [v for op in instr.operands for v in values[id(op)]]
        elif instr.opcode == "get-tuple-element":
            values[id(instr)] = [values[id(instr.operand(0))][int(instr.attrs["index"])]]
        elif (instr.opcode == "bitcast" and instr.shape.rank == 0
              and instr.shape.element_type != instr.operand(0).shape.element_type):
            # a scalar bitcast to another type reinterprets the bits, as the evaluator reads it (JAX's
            # older sort comparators bitcast f32 keys to s32)
            values[id(instr)] = [ELEMENTAL["bitcast-convert"](b, instr, [values[id(instr.operand(0))][0]])]
        elif instr.opcode in ("broadcast", "reshape", "bitcast", "copy", "transpose") and instr.shape.rank == 0:
            values[id(instr)] = values[id(instr.operand(0))]
        elif instr.opcode in ELEMENTAL:
            values[id(instr)] = [emit_elementwise(b, instr, [values[id(op)][0] for op in instr.operands])]
        else:
            raise UnsupportedError(f"unsupported: {instr.opcode} in scalar computation '{computation.name}' "
                                   f"(instruction '{instr.name}')")
    return values[id(computation.root)]
