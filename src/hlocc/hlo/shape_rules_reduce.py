"""Shape rules of the ops that apply a called computation over an operand: reduce, reduce-window,
select-and-scatter, sort, topk, map and scan (XLA's ShapeInference::InferReduceShape,
InferReduceWindowShape, InferSelectAndScatterShape, InferMapShape, InferTopKShape; sort from
HloVerifier::HandleSort)."""

from __future__ import annotations

from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.opcodes import register_shape_rule
from hlocc.hlo.shape_rules_common import (
    array,
    array_operand,
    check_arity,
    check_call_params,
    check_call_result,
    check_dims_in_rank,
    check_scalar,
    check_scalar_reducer,
    computation_attr,
    declared,
    fail,
    get_attr,
    scalar,
    signature,
    window_output_shape,
)
from hlocc.hlo.types import PRED, S32, UNBOUNDED, Shape


def _inputs_and_inits(instr: HloInstruction, shapes: list[Shape]) -> tuple[list[Shape], list[Shape]]:
    """Split `N inputs, N inits`: inputs are arrays of equal dimensions, inits scalars."""
    if not shapes or len(shapes) % 2:
        fail(instr, f"{instr.opcode} takes N inputs followed by N init values, got {len(shapes)} operands")
    n = len(shapes) // 2
    inputs = [array_operand(instr, shapes, i, f"input {i}") for i in range(n)]
    inits = shapes[n:]
    for i, init in enumerate(inits):
        check_scalar(instr, init, f"init value {i}")
    for inp in inputs[1:]:
        if inp.dims != inputs[0].dims:
            fail(instr, f"inputs of {instr.opcode} must have equal dimensions, got {inputs[0]} and {inp}")
    return inputs, inits


def _maybe_tuple(results: list[Shape], as_tuple: bool = False) -> Shape:
    return results[0] if len(results) == 1 and not as_tuple else Shape.tuple(results)


@register_shape_rule("reduce")
def infer_reduce(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """reduce(inputs..., inits...): the inputs' dimensions minus the reduced ones, with the
    accumulator types of to_apply; a tuple when N > 1."""
    inputs, inits = _inputs_and_inits(instr, shapes)
    reduced = get_attr(instr, "dimensions")
    base = inputs[0]
    check_dims_in_rank(instr, reduced, base.rank, "reduce dimensions")
    types, as_tuple = check_scalar_reducer(instr, computation_attr(instr, "to_apply"), "to_apply", inputs, inits)
    kept = [i for i in range(base.rank) if i not in reduced]
    dims = [base.dims[i] for i in kept]
    dynamic = [base.dynamic[i] for i in kept]
    return _maybe_tuple([array(t, dims, dynamic) for t in types], as_tuple)


@register_shape_rule("reduce-window")
def infer_reduce_window(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """reduce-window(inputs..., inits...): each input's window output shape with the accumulator
    types of to_apply; a tuple when N > 1."""
    inputs, inits = _inputs_and_inits(instr, shapes)
    window = instr.attrs.get("window", ())  # optional: no window is an empty one (XLA)
    types, as_tuple = check_scalar_reducer(instr, computation_attr(instr, "to_apply"), "to_apply", inputs, inits)
    return _maybe_tuple([window_output_shape(instr, inputs[0], window, t) for t in types], as_tuple)


@register_shape_rule("select-and-scatter")
def infer_select_and_scatter(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """select-and-scatter(operand, source, init): the operand's shape. `select` is (T, T) -> pred[];
    `scatter` a reducer over the source type; the source has the window output shape."""
    check_arity(instr, shapes, 3)
    operand = array_operand(instr, shapes, 0, "operand")
    source = array_operand(instr, shapes, 1, "source")
    init = shapes[2]
    check_scalar(instr, init, "init value")
    element = scalar(operand.element_type)
    select = computation_attr(instr, "select")
    check_call_params(instr, select, "select", [element, element])
    check_call_result(instr, select, "select", scalar(PRED))
    check_scalar_reducer(instr, computation_attr(instr, "scatter"), "scatter", [source], [init])
    expected = window_output_shape(instr, operand, get_attr(instr, "window"), source.element_type)
    if not source.compatible(expected):
        fail(instr, f"source {source} must have the window output shape {expected}")
    return array(operand.element_type, operand.dims, operand.dynamic)


def _check_comparator(instr: HloInstruction, operands: list[Shape]) -> None:
    """The comparator takes two scalars per operand (of its element type) and returns pred[]."""
    comparator = computation_attr(instr, "to_apply")
    expected = [scalar(s.element_type) for s in operands for _ in range(2)]
    check_call_params(instr, comparator, "comparator", expected)
    check_call_result(instr, comparator, "comparator", scalar(PRED))


@register_shape_rule("sort")
def infer_sort(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """sort(operands...): the operands' shapes (a tuple for several); all have equal dimensions."""
    if not shapes:
        fail(instr, "sort needs at least one operand")
    operands = [array_operand(instr, shapes, i) for i in range(len(shapes))]
    for s in operands[1:]:
        if s.dims != operands[0].dims:
            fail(instr, f"operands of sort must have equal dimensions, got {operands[0]} and {s}")
    dims = get_attr(instr, "dimensions")
    if len(dims) != 1:
        fail(instr, f"sort takes exactly one dimension, got {tuple(dims)}")
    check_dims_in_rank(instr, dims, operands[0].rank, "sort dimension")
    _check_comparator(instr, operands)
    return _maybe_tuple([array(s.element_type, s.dims, s.dynamic) for s in operands])


@register_shape_rule("topk")
def infer_topk(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """(values, s32 indices), both the operand's shape with the last dimension k <= its size."""
    check_arity(instr, shapes, 1)
    operand = array_operand(instr, shapes, 0)
    if operand.rank == 0:
        fail(instr, "topk needs an operand of rank >= 1")
    k = get_attr(instr, "k")
    if k < 0 or (operand.dims[-1] != UNBOUNDED and k > operand.dims[-1]):
        fail(instr, f"topk k={k} is out of range for the last dimension of {operand}")
    dims = operand.dims[:-1] + (k,)
    dynamic = operand.dynamic[:-1] + (False,)
    return Shape.tuple([array(operand.element_type, dims, dynamic), array(S32, dims, dynamic)])


@register_shape_rule("map")
def infer_map(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """map(operands...): the operands' dimensions with to_apply's result type; to_apply takes one
    scalar per operand; `dimensions`, when given, lists every dimension in order."""
    if not shapes:
        fail(instr, "map needs at least one operand")
    operands = [array_operand(instr, shapes, i) for i in range(len(shapes))]
    base = operands[0]
    for s in operands[1:]:
        if s.dims != base.dims:
            fail(instr, f"operands of map must have equal dimensions, got {base} and {s}")
    dims = instr.attrs.get("dimensions")
    if dims is not None and tuple(dims) != tuple(range(base.rank)):
        fail(instr, f"map dimensions {tuple(dims)} must be all dimensions in order")
    comp = computation_attr(instr, "to_apply")
    check_call_params(instr, comp, "to_apply", [scalar(s.element_type) for s in operands])
    _, result = signature(comp)
    if not result.is_array or result.rank != 0:
        fail(instr, f"to_apply computation '{comp.name}' of map must return a scalar, got {result}")
    return array(result.element_type, base.dims, base.dynamic)


@register_shape_rule("scan")
def infer_scan(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """The declared shape (scan's outputs and carries); `dimensions` names one dimension and
    to_apply is a computation."""
    dims = get_attr(instr, "dimensions")
    if len(dims) != 1:
        fail(instr, f"scan takes exactly one dimension, got {tuple(dims)}")
    computation_attr(instr, "to_apply")
    return declared(instr)
