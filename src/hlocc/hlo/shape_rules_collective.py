"""Shape rules of the collective ops (all-reduce, all-gather, reduce-scatter, all-to-all,
collective-broadcast, collective-permute and their -start/-done forms), following XLA's
ShapeInference::InferAllReduceShape, InferAllGatherShape, InferReduceScatterShape,
InferAllToAllShape. The number of participants comes from replica_groups, which hlocc keeps as raw
text, so the gathered or scattered size is taken from the declared shape and checked to be a
multiple of the operand's.
"""

from __future__ import annotations

from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.opcodes import register_shape_rule
from hlocc.hlo.shape_rules_common import (
    array_operand,
    check_arity,
    check_scalar_reducer,
    computation_attr,
    declared,
    declared_shape,
    fail,
    get_attr,
    strip_layout,
)
from hlocc.hlo.types import Shape


def _operands_shape(shapes: list[Shape]) -> Shape:
    """The operand's shape, or the tuple of the operands' shapes when there are several."""
    if len(shapes) == 1:
        return strip_layout(shapes[0])
    return Shape.tuple(strip_layout(s) for s in shapes)


def _declared_leaves(instr: HloInstruction, count: int) -> list[Shape]:
    out = declared_shape(instr)
    leaves = list(out.tuple_shapes) if out.is_tuple else [out]
    if len(leaves) != count:
        fail(instr, f"{instr.opcode} of {count} operand(s) must produce {count} result(s), declared {out}")
    return leaves


@register_shape_rule("all-reduce", "all-reduce-start")
def infer_all_reduce(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """The operands' shapes (a tuple for several); to_apply reduces two scalars of the operands'
    type."""
    if not shapes:
        fail(instr, f"{instr.opcode} needs at least one operand")
    operands = [array_operand(instr, shapes, i) for i in range(len(shapes))]
    check_scalar_reducer(instr, computation_attr(instr, "to_apply"), "to_apply", operands[:1], operands[:1])
    return _operands_shape(shapes)


def _check_resized(instr: HloInstruction, operand: Shape, result: Shape, dim: int, gather: bool) -> None:
    """`result` equals `operand` except in `dim`, where one is a whole multiple of the other."""
    if not result.is_array or result.rank != operand.rank or result.element_type != operand.element_type:
        fail(instr, f"{instr.opcode} result {result} must have the rank and type of the operand {operand}")
    if not 0 <= dim < operand.rank:
        fail(instr, f"{instr.opcode} dimension {dim} is out of range for rank {operand.rank}")
    for i in range(operand.rank):
        small, big = (operand.dims[i], result.dims[i]) if gather else (result.dims[i], operand.dims[i])
        if i == dim:
            if (small == 0 and big != 0) or (small and big % small):
                fail(instr, f"dimension {dim} of {result} must be a multiple of {small if gather else big}")
        elif small != big:
            fail(instr, f"{instr.opcode} result {result} must match the operand {operand} outside dimension {dim}")


def _resizing_collective(instr: HloInstruction, shapes: list[Shape], gather: bool) -> Shape:
    if not shapes:
        fail(instr, f"{instr.opcode} needs at least one operand")
    dims = get_attr(instr, "dimensions")
    if len(dims) != 1:
        fail(instr, f"{instr.opcode} takes exactly one dimension, got {tuple(dims)}")
    for i, result in enumerate(_declared_leaves(instr, len(shapes))):
        _check_resized(instr, array_operand(instr, shapes, i), result, dims[0], gather)
    return declared(instr)


@register_shape_rule("all-gather")
def infer_all_gather(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """The declared shape: each operand concatenated over the participants along `dimensions`."""
    return _resizing_collective(instr, shapes, gather=True)


@register_shape_rule("reduce-scatter")
def infer_reduce_scatter(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """The declared shape: each operand reduced and split over the participants along `dimensions`."""
    operands = [array_operand(instr, shapes, i) for i in range(len(shapes))]
    check_scalar_reducer(instr, computation_attr(instr, "to_apply"), "to_apply", operands[:1], operands[:1])
    return _resizing_collective(instr, shapes, gather=False)


@register_shape_rule("all-gather-start")
def infer_all_gather_start(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """The declared shape: the gathered result, or (operands, results)."""
    if not shapes:
        fail(instr, "all-gather-start needs at least one operand")
    return declared(instr)


@register_shape_rule("all-to-all")
def infer_all_to_all(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """With `dimensions` (array form): the operand's shape, whose split dimension is a multiple of
    the participants. Without (tuple form): the tuple of the operands' shapes."""
    if "dimensions" not in instr.attrs:
        return Shape.tuple(strip_layout(s) for s in shapes)
    check_arity(instr, shapes, 1)
    operand = array_operand(instr, shapes, 0)
    dims = instr.attrs["dimensions"]
    if len(dims) != 1 or not 0 <= dims[0] < operand.rank:
        fail(instr, f"all-to-all dimensions {tuple(dims)} must name one dimension of {operand}")
    return strip_layout(operand)


@register_shape_rule("collective-broadcast")
def infer_collective_broadcast(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """The operands' shapes (a tuple for several)."""
    if not shapes:
        fail(instr, "collective-broadcast needs at least one operand")
    return _operands_shape(shapes)


@register_shape_rule("collective-permute", "collective-permute-start")
def infer_collective_permute(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """One operand: its shape. The in-place form (input, output, offsets...): the declared shape."""
    if not shapes:
        fail(instr, f"{instr.opcode} needs at least one operand")
    if len(shapes) == 1 and instr.opcode == "collective-permute":
        return strip_layout(shapes[0])
    return declared(instr)


@register_shape_rule("all-gather-done", "all-reduce-done", "collective-permute-done")
def infer_collective_done(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """The declared result of the matching -start: its operand itself, or an element of it when the
    start produced a tuple."""
    check_arity(instr, shapes, 1)
    operand, out = shapes[0], declared_shape(instr)
    candidates = [operand] + (list(operand.tuple_shapes) if operand.is_tuple else [])
    if not any(c.compatible(out) for c in candidates):
        fail(instr, f"{instr.opcode} result {strip_layout(out)} does not match its start operand {operand}")
    return declared(instr)


@register_shape_rule("ragged-all-to-all")
def infer_ragged_all_to_all(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """ragged-all-to-all(input, output, input_offsets, send_sizes, output_offsets, recv_sizes):
    the output operand's shape; the four offset/size operands are integer arrays of equal shape."""
    check_arity(instr, shapes, 6)
    data = array_operand(instr, shapes, 0, "input")
    output = array_operand(instr, shapes, 1, "output")
    if data.element_type != output.element_type or data.rank != output.rank:
        fail(instr, f"input {data} and output {output} of ragged-all-to-all must have one type and rank")
    sizes = [array_operand(instr, shapes, i, "offsets/sizes") for i in range(2, 6)]
    for s in sizes:
        if not s.element_type.is_integer or s.dims != sizes[0].dims:
            fail(instr, f"offset and size operands of ragged-all-to-all must be integer arrays of one shape, got {s}")
    return strip_layout(output)
