"""Shape rules of the elementwise ops (unary, binary, ternary), following XLA's
ShapeInference::InferUnaryOpShape / InferBinaryOpShape / InferTernaryOpShape.

Operands of an elementwise op have equal dimensions (HLO has no implicit broadcasting; the only
scalar broadcasting is clamp's min/max and select's predicate, as XLA accepts). The accepted element
types are those of the op's registry entry (`OpInfo.types`). The result has the operands'
dimensions, a dimension being dynamic if it is dynamic in any operand.
"""

from __future__ import annotations

from collections.abc import Callable

from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.opcodes import OPCODES, register_shape_rule
from hlocc.hlo.shape_rules_common import (
    array,
    array_operand,
    check_arity,
    check_same_element_type,
    complex_component_type,
    declared_element_type,
    fail,
    get_attr,
    merge_shapes,
)
from hlocc.hlo.types import PRED, PRIMITIVE_TYPES, PrimitiveType, Shape

_TYPE_CLASSES: dict[str, tuple[str, Callable[[PrimitiveType], bool]]] = {
    "float": ("a floating-point type", lambda t: t.is_float),
    "floatc": ("a floating-point or complex type", lambda t: t.is_float or t.is_complex),
    "num": ("a numeric type", lambda t: t.is_integer or t.is_float or t.is_complex),
    "numpred": ("a numeric or pred type", lambda t: t.is_array_type),
    "int": ("an integer type", lambda t: t.is_integer),
    "intpred": ("an integer or pred type", lambda t: t.is_integer or t.is_pred),
    "signed_num": ("a signed integer, floating-point or complex type",
                   lambda t: t.is_signed or t.is_float or t.is_complex),
    "any": ("an array type", lambda t: t.is_array_type),
}



def check_element_type(instr: HloInstruction, shape: Shape) -> None:
    """`shape`'s element type is one the op's registry entry accepts (`OpInfo.types`)."""
    words, accepts = _TYPE_CLASSES[OPCODES[instr.opcode].types]
    if not accepts(shape.element_type):
        fail(instr, f"{instr.opcode} requires {words}, got {shape}")


# -- unary ------------------------------------------------------------------------------------------
_SAME_TYPE_UNARY = [
    "acos", "acosh", "asin", "asinh", "atanh", "cbrt", "ceil", "cosh", "erf", "floor", "round-nearest-afz",
    "round-nearest-even", "sinh", "cosine", "exponential", "exponential-minus-one", "log", "log-plus-one",
    "logistic", "rsqrt", "sine", "sqrt", "tan", "tanh", "negate", "sign", "not", "popcnt",
    "count-leading-zeros", "copy",
]


def _unary_operand(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    check_arity(instr, shapes, 1)
    operand = array_operand(instr, shapes, 0)
    check_element_type(instr, operand)
    return operand


@register_shape_rule(*_SAME_TYPE_UNARY)
def infer_unary(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """Same shape as the operand."""
    operand = _unary_operand(instr, shapes)
    return array(operand.element_type, operand.dims, operand.dynamic)


@register_shape_rule("abs", "real", "imag")
def infer_complex_to_real(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """abs/real/imag of a complex operand give its component type; otherwise the operand's type."""
    operand = _unary_operand(instr, shapes)
    et = operand.element_type
    return array(complex_component_type(et) if et.is_complex else et, operand.dims, operand.dynamic)


@register_shape_rule("is-finite")
def infer_is_finite(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """pred with the operand's dimensions."""
    operand = _unary_operand(instr, shapes)
    return array(PRED, operand.dims, operand.dynamic)


@register_shape_rule("reduce-precision")
def infer_reduce_precision(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """Same shape; exponent_bits >= 1 and mantissa_bits >= 0."""
    operand = _unary_operand(instr, shapes)
    if get_attr(instr, "exponent_bits") < 1:
        fail(instr, f"reduce-precision needs exponent_bits >= 1, got {instr.attrs['exponent_bits']}")
    if get_attr(instr, "mantissa_bits") < 0:
        fail(instr, f"reduce-precision needs mantissa_bits >= 0, got {instr.attrs['mantissa_bits']}")
    return array(operand.element_type, operand.dims, operand.dynamic)


@register_shape_rule("convert")
def infer_convert(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """The operand's dimensions with the declared element type; complex converts only to complex."""
    operand = _unary_operand(instr, shapes)
    target = declared_element_type(instr)
    if operand.element_type.is_complex and not target.is_complex:
        fail(instr, f"convert from complex {operand} to non-complex type {target} is not allowed")
    return array(target, operand.dims, operand.dynamic)


@register_shape_rule("bitcast-convert")
def infer_bitcast_convert(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """Reinterpret bits as the declared element type: equal widths keep the dimensions; a narrower
    target appends a minor dimension of size in_bits/out_bits; a wider one removes the minor
    dimension, which must have size out_bits/in_bits."""
    operand = _unary_operand(instr, shapes)
    target = declared_element_type(instr)
    in_bits, out_bits = operand.element_type.bits, target.bits
    if operand.element_type.is_pred != target.is_pred:
        fail(instr, f"bitcast-convert between pred and non-pred types is not allowed ({operand} to {target})")
    if in_bits == out_bits:
        return array(target, operand.dims, operand.dynamic)
    if in_bits > out_bits:
        if in_bits % out_bits:
            fail(instr, f"bitcast-convert from {in_bits}-bit to {out_bits}-bit type: widths do not divide")
        return array(target, operand.dims + (in_bits // out_bits,), operand.dynamic + (False,))
    ratio = out_bits // in_bits
    if out_bits % in_bits or operand.rank == 0 or operand.dims[-1] != ratio:
        fail(instr, f"bitcast-convert from {operand} to {out_bits}-bit {target} needs a minor dimension of "
                    f"size {ratio}")
    return array(target, operand.dims[:-1], operand.dynamic[:-1])


# -- binary -----------------------------------------------------------------------------------------
_SAME_TYPE_BINARY = [
    "add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "power", "and", "or", "xor",
    "shift-left", "shift-right-arithmetic", "shift-right-logical", "atan2",
]
_COMPARISON_DIRECTIONS = ("EQ", "NE", "GE", "GT", "LE", "LT")
_COMPARISON_TYPES = ("FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED")


def _binary_dims(instr: HloInstruction, shapes: list[Shape]) -> tuple[Shape, list[int], list[bool]]:
    """Check two array operands of one element type and equal dimensions; return the lhs and the
    merged dimensions."""
    check_arity(instr, shapes, 2)
    lhs = array_operand(instr, shapes, 0, "lhs")
    rhs = array_operand(instr, shapes, 1, "rhs")
    check_element_type(instr, lhs)
    check_same_element_type(instr, lhs, rhs, "operands")
    dims, dynamic = merge_shapes(instr, f"operands of {instr.opcode} must have equal dimensions", lhs, rhs)
    return lhs, dims, dynamic


@register_shape_rule(*_SAME_TYPE_BINARY)
def infer_binary(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """The common shape of two operands of equal shape."""
    lhs, dims, dynamic = _binary_dims(instr, shapes)
    return array(lhs.element_type, dims, dynamic)


@register_shape_rule("compare")
def infer_compare(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """pred with the operands' dimensions; `direction` is one of EQ NE GE GT LE LT."""
    _, dims, dynamic = _binary_dims(instr, shapes)
    direction = get_attr(instr, "direction")
    if direction not in _COMPARISON_DIRECTIONS:
        fail(instr, f"compare direction must be one of {', '.join(_COMPARISON_DIRECTIONS)}, got '{direction}'")
    kind = instr.attrs.get("type")
    if kind is not None and kind not in _COMPARISON_TYPES:
        fail(instr, f"compare type must be one of {', '.join(_COMPARISON_TYPES)}, got '{kind}'")
    return array(PRED, dims, dynamic)


@register_shape_rule("complex")
def infer_complex(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """complex(f32, f32) is c64, complex(f64, f64) is c128."""
    lhs, dims, dynamic = _binary_dims(instr, shapes)
    name = {"f32": "c64", "f64": "c128"}.get(lhs.element_type.name)
    if name is None:
        fail(instr, f"complex requires f32 or f64 operands, got {lhs}")
    return array(PRIMITIVE_TYPES[name], dims, dynamic)


@register_shape_rule("stochastic-convert")
def infer_stochastic_convert(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """Rounds a float operand to the declared integer type using random bits: an unsigned operand of the
    same dimensions and bit width (XLA's InferStochasticConvertShape: the result is integral)."""
    check_arity(instr, shapes, 2)
    operand = array_operand(instr, shapes, 0)
    random = array_operand(instr, shapes, 1, "random bits")
    check_element_type(instr, operand)
    if not random.element_type.is_unsigned or random.element_type.bits != operand.element_type.bits:
        fail(instr, f"random bits of stochastic-convert must be unsigned of the operand's width, got {random}")
    dims, dynamic = merge_shapes(instr, "operands of stochastic-convert must have equal dimensions",
                                 operand, random)
    result = declared_element_type(instr)
    if not result.is_integer:
        fail(instr, f"stochastic-convert rounds to an integer type, got the result type {result.name}")
    return array(result, dims, dynamic)


# -- ternary ----------------------------------------------------------------------------------------
@register_shape_rule("select")
def infer_select(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """select(pred, on_true, on_false): branches of equal shape; pred of their dimensions (a scalar
    pred is accepted, as XLA does)."""
    check_arity(instr, shapes, 3)
    pred = array_operand(instr, shapes, 0, "predicate")
    on_true = array_operand(instr, shapes, 1, "on_true")
    on_false = array_operand(instr, shapes, 2, "on_false")
    if pred.element_type != PRED:
        fail(instr, f"select predicate must be pred, got {pred}")
    check_same_element_type(instr, on_true, on_false, "branches")
    dims, dynamic = merge_shapes(instr, "select branches must have equal dimensions", on_true, on_false)
    result = array(on_true.element_type, dims, dynamic)
    if pred.rank:
        dims, dynamic = merge_shapes(instr, "select predicate must have the branches' dimensions",
                                     result, pred)
    return array(on_true.element_type, dims, dynamic)


@register_shape_rule("clamp")
def infer_clamp(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """clamp(min, operand, max): min and max are scalars or of the operand's shape; one type."""
    check_arity(instr, shapes, 3)
    low = array_operand(instr, shapes, 0, "min")
    operand = array_operand(instr, shapes, 1, "operand")
    high = array_operand(instr, shapes, 2, "max")
    check_element_type(instr, operand)
    dims, dynamic = list(operand.dims), list(operand.dynamic)
    for role, bound in (("min", low), ("max", high)):
        check_same_element_type(instr, bound, operand, f"{role} and operand")
        if bound.rank:
            dims, dynamic = merge_shapes(instr, f"clamp {role} must be a scalar or have the operand's dimensions",
                                         array(operand.element_type, dims, dynamic), bound)
    return array(operand.element_type, dims, dynamic)
