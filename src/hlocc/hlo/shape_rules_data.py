"""Shape rules of the data-movement ops: broadcast, reshape, bitcast, transpose, reverse, slice,
dynamic-slice, dynamic-update-slice, pad, concatenate, iota, constant, parameter, tuple,
get-tuple-element and the dynamic-dimension ops, following XLA's ShapeInference and HloVerifier.
"""

from __future__ import annotations

import numpy as np

from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.opcodes import register_shape_rule
from hlocc.hlo.shape_rules_common import (
    array,
    array_operand,
    check_arity,
    check_dims_in_rank,
    check_permutation,
    check_same_element_type,
    check_scalar,
    declared,
    declared_shape,
    dims_agree,
    fail,
    get_attr,
    merge_dim,
    s32_scalar,
    strip_layout,
    surely_below,
)
from hlocc.hlo.symbolic import DimExpr
from hlocc.hlo.types import UNBOUNDED, Shape


def _declared_array(instr: HloInstruction) -> Shape:
    if not declared_shape(instr).is_array:
        fail(instr, f"{instr.opcode} must produce an array, declared {instr.shape}")
    return instr.shape


@register_shape_rule("broadcast")
def infer_broadcast(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """The declared dimensions with the operand's element type. Operand dimension i maps to output
    dimension dimensions[i] and has exactly its size (HLO broadcast never stretches size-1
    dimensions, as HloVerifier::HandleBroadcast requires)."""
    check_arity(instr, shapes, 1)
    operand = array_operand(instr, shapes, 0)
    out = _declared_array(instr)
    dims = get_attr(instr, "dimensions", ())
    if len(dims) != operand.rank:
        fail(instr, f"broadcast dimensions {tuple(dims)} must have one entry per operand dimension "
                    f"(operand {operand})")
    check_dims_in_rank(instr, dims, out.rank, "broadcast dimensions")
    for i, d in enumerate(dims):
        if not dims_agree(operand, i, out, d):
            fail(instr, f"operand dimension {i} (size {operand.dims[i]}) does not match output "
                        f"dimension {d} (size {out.dims[d]})")
    return array(operand.element_type, out.dims, out.dynamic)


@register_shape_rule("reshape")
def infer_reshape(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """The declared dimensions with the operand's element type and the same element count."""
    check_arity(instr, shapes, 1)
    operand = array_operand(instr, shapes, 0)
    out = _declared_array(instr)
    # Symbolic sizes must be equal as products of polynomials (b*128 = (2*b)*64); `?`/`<=N` are not checked.
    checked = not (operand.has_bounded_dims or out.has_bounded_dims)
    if checked and operand.num_elements != out.num_elements:
        fail(instr, f"reshape from {operand} to {out.dims_str()} changes the element count "
                    f"({operand.num_elements} vs {out.num_elements})")
    return array(operand.element_type, out.dims, out.dynamic)


@register_shape_rule("dynamic-reshape")
def infer_dynamic_reshape(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """dynamic-reshape(operand, size_0, ..., size_{r-1}): the declared dims (bounds), one integer
    scalar per output dimension."""
    operand = array_operand(instr, shapes, 0)
    out = _declared_array(instr)
    check_arity(instr, shapes, 1 + out.rank)
    for i, s in enumerate(shapes[1:]):
        check_scalar(instr, s, f"size operand {i}", integral=True)
    return array(operand.element_type, out.dims, out.dynamic)


@register_shape_rule("bitcast")
def infer_bitcast(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """The declared shape; an array bitcast must keep the number of bits."""
    check_arity(instr, shapes, 1)
    operand, out = shapes[0], declared_shape(instr)
    if operand.is_array and out.is_array and operand.is_static and out.is_static:
        in_bits = operand.num_elements * operand.element_type.bits
        out_bits = out.num_elements * out.element_type.bits
        if in_bits != out_bits:
            fail(instr, f"bitcast from {operand} to {strip_layout(out)} changes the size "
                        f"({in_bits} vs {out_bits} bits)")
    return declared(instr)


@register_shape_rule("transpose")
def infer_transpose(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """Output dimension i is operand dimension dimensions[i]."""
    check_arity(instr, shapes, 1)
    operand = array_operand(instr, shapes, 0)
    perm = get_attr(instr, "dimensions")
    check_permutation(instr, perm, operand.rank, "transpose dimensions")
    return array(operand.element_type, [operand.dims[p] for p in perm], [operand.dynamic[p] for p in perm])


@register_shape_rule("reverse")
def infer_reverse(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """Same shape; the reversed dimensions are distinct and within the rank."""
    check_arity(instr, shapes, 1)
    operand = array_operand(instr, shapes, 0)
    check_dims_in_rank(instr, get_attr(instr, "dimensions"), operand.rank, "reverse dimensions")
    return array(operand.element_type, operand.dims, operand.dynamic)


@register_shape_rule("slice")
def infer_slice(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """Dimension i has ceil((limit - start) / stride) elements, 0 <= start <= limit <= size."""
    check_arity(instr, shapes, 1)
    operand = array_operand(instr, shapes, 0)
    spec = get_attr(instr, "slice")
    if len(spec) != operand.rank:
        fail(instr, f"slice has {len(spec)} dimensions but the operand {operand} has rank {operand.rank}")
    dims, dynamic = [], []
    for i, s in enumerate(spec):
        size = operand.dims[i]
        if s.stride <= 0:
            fail(instr, f"slice stride of dimension {i} must be positive, got {s.stride}")
        if (surely_below(s.start, 0) or surely_below(s.limit, s.start)
                or (size != UNBOUNDED and surely_below(size, s.limit))):
            fail(instr, f"slice [{s.start}:{s.limit}] of dimension {i} is out of bounds for size "
                        f"{operand.dims_str()}")
        dims.append((s.limit - s.start + s.stride - 1) // s.stride)
        # A slice covering a whole dynamic dimension stays dynamic.
        dynamic.append(operand.dynamic[i] and s.start == 0 and s.stride == 1 and s.limit == size)
    return array(operand.element_type, dims, dynamic)


def _check_start_indices(instr: HloInstruction, shapes: list[Shape], first: int, rank: int) -> None:
    """Operands first.. are `rank` integer scalars of one type (or, in the legacy form, one rank-1
    integer vector of `rank` elements)."""
    starts = shapes[first:]
    if len(starts) == 1 and starts[0].is_array and starts[0].rank == 1 and rank != 1:
        if starts[0].dims[0] != rank or not starts[0].element_type.is_integer:
            fail(instr, f"start index vector of {instr.opcode} must be an integer [{rank}], got {starts[0]}")
        return
    if len(starts) != rank:
        fail(instr, f"{instr.opcode} needs {rank} start indices (one per operand dimension), got {len(starts)}")
    for i, s in enumerate(starts):
        check_scalar(instr, s, f"start index {i}", integral=True)
        if s.element_type != starts[0].element_type:
            fail(instr, f"start indices of {instr.opcode} must have one type, got {starts[0]} and {s}")


def _exceeds(window, dim) -> bool:
    """Whether a window size is larger than its dimension at every size (`surely_below`)."""
    return dim != UNBOUNDED and surely_below(dim, window)


@register_shape_rule("dynamic-slice")
def infer_dynamic_slice(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """dynamic-slice(operand, start...): the dynamic_slice_sizes, each within its dimension."""
    operand = array_operand(instr, shapes, 0)
    sizes = get_attr(instr, "dynamic_slice_sizes")
    _check_start_indices(instr, shapes, 1, operand.rank)
    if len(sizes) != operand.rank:
        fail(instr, f"dynamic_slice_sizes has {len(sizes)} entries but the operand {operand} has rank "
                    f"{operand.rank}")
    for i, s in enumerate(sizes):
        if (not isinstance(s, DimExpr) and s < 0) or _exceeds(s, operand.dims[i]):
            fail(instr, f"dynamic slice size {s} of dimension {i} is out of bounds for {operand}")
    return array(operand.element_type, sizes)


@register_shape_rule("dynamic-update-slice")
def infer_dynamic_update_slice(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """dynamic-update-slice(operand, update, start...): the operand's shape; the update has the
    operand's rank and type and fits inside it."""
    operand = array_operand(instr, shapes, 0)
    update = array_operand(instr, shapes, 1, "update")
    check_same_element_type(instr, operand, update, "operand and update")
    if update.rank != operand.rank:
        fail(instr, f"update {update} must have the rank of the operand {operand}")
    _check_start_indices(instr, shapes, 2, operand.rank)
    for i in range(operand.rank):
        if _exceeds(update.dims[i], operand.dims[i]):
            fail(instr, f"update dimension {i} (size {update.dims[i]}) exceeds the operand's "
                        f"(size {operand.dims[i]})")
    return array(operand.element_type, operand.dims, operand.dynamic)


@register_shape_rule("pad")
def infer_pad(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """Dimension i becomes lo + hi + size + (size - 1) * interior (lo, hi may be negative,
    interior >= 0); the padding value is a scalar of the operand's type."""
    check_arity(instr, shapes, 2)
    operand = array_operand(instr, shapes, 0)
    value = shapes[1]
    check_scalar(instr, value, "padding value")
    check_same_element_type(instr, operand, value, "operand and padding value")
    padding = get_attr(instr, "padding")
    if len(padding) != operand.rank:
        fail(instr, f"padding has {len(padding)} dimensions but the operand {operand} has rank {operand.rank}")
    dims = []
    for i, p in enumerate(padding):
        if p.interior < 0:
            fail(instr, f"interior padding of dimension {i} must be non-negative, got {p.interior}")
        size = operand.dims[i]
        if size == UNBOUNDED:
            dims.append(UNBOUNDED)
            continue
        out = p.lo + p.hi + size + (max(size - 1, 0) * p.interior if p.interior else 0)
        if isinstance(out, int) and out < 0:
            fail(instr, f"padding {p} of dimension {i} (size {size}) gives negative size {out}")
        dims.append(out)
    return array(operand.element_type, dims, operand.dynamic)


@register_shape_rule("concatenate")
def infer_concatenate(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """Operands of one type and rank, equal except in the concatenated dimension, whose sizes add."""
    if not shapes:
        fail(instr, "concatenate needs at least one operand")
    first = array_operand(instr, shapes, 0)
    dims_attr = get_attr(instr, "dimensions")
    if len(dims_attr) != 1:
        fail(instr, f"concatenate takes exactly one dimension, got {tuple(dims_attr)}")
    axis = dims_attr[0]
    check_dims_in_rank(instr, (axis,), first.rank, "concatenate dimension")
    dims, dynamic = list(first.dims), list(first.dynamic)
    for k in range(1, len(shapes)):
        other = array_operand(instr, shapes, k)
        check_same_element_type(instr, first, other, "operands")
        if other.rank != first.rank:
            fail(instr, f"operands of concatenate must have equal rank, got {first} and {other}")
        current = array(first.element_type, dims, dynamic)
        for i in range(first.rank):
            if i == axis:
                unbounded = UNBOUNDED in (dims[i], other.dims[i])
                dims[i] = UNBOUNDED if unbounded else dims[i] + other.dims[i]
                dynamic[i] = dynamic[i] or other.dynamic[i]
            else:
                dims[i], dynamic[i] = merge_dim(
                    instr, f"operands of concatenate must agree outside dimension {axis}", current, i, other, i)
    return array(first.element_type, dims, dynamic)


@register_shape_rule("iota")
def infer_iota(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """The declared array shape of rank >= 1; iota_dimension is one of its dimensions."""
    check_arity(instr, shapes, 0)
    out = _declared_array(instr)
    if out.rank == 0:
        fail(instr, "iota does not support scalars")
    check_dims_in_rank(instr, (get_attr(instr, "iota_dimension"),), out.rank, "iota_dimension")
    return declared(instr)


@register_shape_rule("constant")
def infer_constant(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """The declared shape, which an array literal's dimensions must match."""
    check_arity(instr, shapes, 0)
    literal = instr.literal
    if isinstance(literal, np.ndarray) and instr.shape.is_array and literal.shape != instr.shape.dims:
        fail(instr, f"constant literal of dimensions {list(literal.shape)} does not match {instr.shape}")
    return declared(instr)


@register_shape_rule("parameter")
def infer_parameter(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """The declared shape; the parameter number is non-negative."""
    check_arity(instr, shapes, 0)
    if instr.parameter_number is None or instr.parameter_number < 0:
        fail(instr, f"parameter has invalid number {instr.parameter_number}")
    return declared(instr)


@register_shape_rule("tuple")
def infer_tuple(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """The tuple of the operand shapes."""
    return Shape.tuple(strip_layout(s) for s in shapes)


@register_shape_rule("get-tuple-element")
def infer_get_tuple_element(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """Element `index` of a tuple operand."""
    check_arity(instr, shapes, 1)
    operand = shapes[0]
    if not operand.is_tuple:
        fail(instr, f"get-tuple-element needs a tuple operand, got {operand}")
    index = get_attr(instr, "index")
    if not 0 <= index < len(operand.tuple_shapes):
        fail(instr, f"tuple index {index} is out of range for {operand} with {len(operand.tuple_shapes)} elements")
    return strip_layout(operand.tuple_shapes[index])


def _dimension_attr(instr: HloInstruction, operand: Shape) -> int:
    dims = get_attr(instr, "dimensions")
    if len(dims) != 1:
        fail(instr, f"{instr.opcode} takes exactly one dimension, got {tuple(dims)}")
    check_dims_in_rank(instr, dims, operand.rank, "dimensions")
    return dims[0]


@register_shape_rule("get-dimension-size")
def infer_get_dimension_size(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """s32[]: the run-time size of one dimension of the operand."""
    check_arity(instr, shapes, 1)
    _dimension_attr(instr, array_operand(instr, shapes, 0))
    return s32_scalar()


@register_shape_rule("set-dimension-size")
def infer_set_dimension_size(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """The operand with one dimension made dynamic (bounded by its size); the size is s32[]. That
    dimension is the size operand's value, which no rule can know: the declared one stands (a
    bound, or the variable or constant runtime/bounded.py gave it)."""
    check_arity(instr, shapes, 2)
    operand = array_operand(instr, shapes, 0)
    dim = _dimension_attr(instr, operand)
    if shapes[1] != s32_scalar():
        fail(instr, f"size operand of set-dimension-size must be s32[], got {shapes[1]}")
    dims, dynamic = list(operand.dims), list(operand.dynamic)
    dynamic[dim] = True
    declared = instr.shape
    if declared is not None and declared.is_array and declared.rank == operand.rank:
        dims[dim], dynamic[dim] = declared.dims[dim], declared.dynamic[dim]
    return array(operand.element_type, dims, dynamic)
