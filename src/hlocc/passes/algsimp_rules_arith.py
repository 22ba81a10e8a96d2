"""Algebraic simplifier rules on values: identity and absorbing elements, involutions, select
with a known predicate, and conversions.

Exactness notes (IEEE 754, XLA's NaN-propagating maximum/minimum):
  * x + (-0.0) = x and x - (+0.0) = x for every float x, but x + (+0.0) is +0.0 for x = -0.0: only
    the signed forms are rules. x * 1 = x and x / 1 = x for floats; x * 0 = 0 only for integers
    (NaN * 0 and inf * 0 are NaN). Complex x * 1 is not a rule (inf * 0 appears in the product).
  * maximum(x, -inf) = x and minimum(x, +inf) = x, NaN included.
  * x + (-y) = x - y and x - (-y) = x + y exactly (subtraction is addition of the negation).
  * convert(convert(x, B), C) = convert(x, C) when B holds every value of x's type exactly and C
    does too (or C is x's type): both sides are then x's exact value. A narrowing last step is left
    alone, since whether it rounds once or twice may depend on the path.
"""

from __future__ import annotations

from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.types import PrimitiveType, primitive_type
from hlocc.passes.pattern import (
    Match,
    Rule,
    is_all_ones,
    is_highest,
    is_lowest,
    is_neg_zero,
    is_one,
    is_pos_zero,
    is_zero,
    of_type,
    op,
    splat,
    var,
)

INT = of_type("int")
INT_PRED = of_type("int", "pred")
FLOAT = of_type("float")
NUMBER = of_type("int", "float")
REAL = of_type("int", "pred", "float")


def _x(m: Match) -> HloInstruction:
    return m["x"]


def _bound(name: str):
    return lambda m: m[name]


def _zeros_like_root(m: Match) -> HloInstruction:
    return m.constant(0, m.root.shape)


def _same_opcode(op_name: str):
    return lambda m: m.add(op_name, [m["x"], m["y"]], shape=m.root.shape)


def _swap_select(m: Match) -> HloInstruction:
    return m.add("select", [m["p"], m["b"], m["a"]], shape=m.root.shape)


# -- conversions --------------------------------------------------------------------------------
_MANTISSA_BITS = {"f16": 10, "bf16": 7, "f32": 23, "f64": 52}
_FLOAT_WIDENINGS = {("f16", "f32"), ("f16", "f64"), ("bf16", "f32"), ("bf16", "f64"), ("f32", "f64")}
_COMPONENT = {"c64": "f32", "c128": "f64"}


def converts_exactly(src: PrimitiveType, dst: PrimitiveType) -> bool:
    """Whether `convert` from `src` to `dst` keeps every value of `src` exactly (NaNs as NaNs)."""
    if src == dst:
        return True
    if src.is_complex:
        return (src.name, dst.name) == ("c64", "c128")
    if dst.is_complex:  # the real part takes the value, the imaginary part is 0
        return converts_exactly(src, primitive_type(_COMPONENT[dst.name]))
    if src.is_pred:
        return dst.is_integer or dst.name in _MANTISSA_BITS
    if src.is_integer and dst.is_integer:
        if src.is_signed:
            return dst.is_signed and dst.bits >= src.bits
        return dst.bits > src.bits if dst.is_signed else dst.bits >= src.bits
    if src.is_integer and dst.name in _MANTISSA_BITS:
        magnitude_bits = src.bits - 1 if src.is_signed else src.bits
        return magnitude_bits <= _MANTISSA_BITS[dst.name] + 1
    if src.is_float and dst.is_float:
        return (src.name, dst.name) in _FLOAT_WIDENINGS or (_is_small_float(src) and dst.name in ("f32", "f64"))
    return False


def _is_small_float(t: PrimitiveType) -> bool:
    """The f8 and f4 types, whose values f32 all holds; e8m0 aside (it has no zero and no sign,
    so it is never the source of a value-preserving chain worth the special case)."""
    return t.is_float and t.bits <= 8 and t.name != "f8e8m0fnu"


def _convert_of_exact_convert(m: Match) -> HloInstruction | None:
    x, middle, result = m["x"].shape.element_type, m["inner"].shape.element_type, m.root.shape.element_type
    if not converts_exactly(x, middle):
        return None
    if result == x:
        return m["x"]
    if converts_exactly(x, result):
        return m.add("convert", [m["x"]], shape=m.root.shape)
    return None


def _same_element_type(instr: HloInstruction) -> bool:
    return instr.shape.element_type == instr.operands[0].shape.element_type


def _bitcast_convert_round_trip(m: Match) -> HloInstruction | None:
    return m["x"] if m["x"].shape == m.root.shape else None


_FULL_PRECISION = {"f16": (5, 10), "bf16": (8, 7), "f32": (8, 23), "f64": (11, 52)}


def _keeps_all_bits(instr: HloInstruction) -> bool:
    """reduce-precision to at least the type's own exponent and mantissa bits (a no-op)."""
    full = _FULL_PRECISION.get(instr.shape.element_type.name)
    return full is not None and instr.attrs["exponent_bits"] >= full[0] and instr.attrs["mantissa_bits"] >= full[1]


def _is_true(v, et) -> bool:
    return et.is_pred and bool(v)


def _is_false(v, et) -> bool:
    return et.is_pred and not bool(v)


ARITH_RULES: tuple[Rule, ...] = (
    # identity elements
    Rule("add(x, 0) → x  [integer]", op("add", var("x", INT_PRED), splat(is_zero)), _x),
    Rule("add(x, -0.0) → x  [float]", op("add", var("x", FLOAT), splat(is_neg_zero)), _x),
    Rule("subtract(x, 0) → x  [integer]", op("subtract", var("x", INT), splat(is_zero)), _x),
    Rule("subtract(x, +0.0) → x  [float]", op("subtract", var("x", FLOAT), splat(is_pos_zero)), _x),
    Rule("multiply(x, 1) → x", op("multiply", var("x", REAL), splat(is_one)), _x),
    Rule("divide(x, 1) → x", op("divide", var("x", NUMBER), splat(is_one)), _x),
    Rule("power(x, 1) → x", op("power", var("x", NUMBER), splat(is_one)), _x),
    Rule("and(x, all ones) → x", op("and", var("x"), splat(is_all_ones)), _x),
    Rule("or(x, 0) → x", op("or", var("x"), splat(is_zero)), _x),
    Rule("xor(x, 0) → x", op("xor", var("x"), splat(is_zero)), _x),
    Rule("maximum(x, lowest) → x", op("maximum", var("x", REAL), splat(is_lowest)), _x),
    Rule("minimum(x, highest) → x", op("minimum", var("x", REAL), splat(is_highest)), _x),
    # absorbing elements (integers and pred only)
    Rule("multiply(x, 0) → 0  [integer]", op("multiply", var("x", INT_PRED), splat(is_zero, bind="zero")),
         _bound("zero")),
    Rule("and(x, 0) → 0", op("and", var("x"), splat(is_zero, bind="zero")), _bound("zero")),
    Rule("or(x, all ones) → all ones", op("or", var("x"), splat(is_all_ones, bind="ones")), _bound("ones")),
    # idempotence and self-inverses
    Rule("and(x, x) → x", op("and", var("x"), var("x")), _x),
    Rule("or(x, x) → x", op("or", var("x"), var("x")), _x),
    Rule("maximum(x, x) → x", op("maximum", var("x"), var("x")), _x),
    Rule("minimum(x, x) → x", op("minimum", var("x"), var("x")), _x),
    Rule("subtract(x, x) → 0  [integer]", op("subtract", var("x", INT), var("x")), _zeros_like_root),
    Rule("xor(x, x) → 0", op("xor", var("x"), var("x")), _zeros_like_root),
    # involutions and sign
    Rule("negate(negate(x)) → x", op("negate", op("negate", var("x"))), _x),
    Rule("not(not(x)) → x", op("not", op("not", var("x"))), _x),
    Rule("abs(abs(x)) → abs(x)", op("abs", op("abs", bind="inner")), _bound("inner")),
    Rule("abs(negate(x)) → abs(x)", op("abs", op("negate", var("x"))),
         lambda m: m.add("abs", [m["x"]], shape=m.root.shape)),
    Rule("add(x, negate(y)) → subtract(x, y)", op("add", var("x"), op("negate", var("y"))), _same_opcode("subtract")),
    Rule("subtract(x, negate(y)) → add(x, y)", op("subtract", var("x"), op("negate", var("y"))), _same_opcode("add")),
    # select
    Rule("select(true, a, b) → a", op("select", splat(_is_true), var("a"), var("b")), _bound("a")),
    Rule("select(false, a, b) → b", op("select", splat(_is_false), var("a"), var("b")), _bound("b")),
    Rule("select(p, a, a) → a", op("select", var("p"), var("a"), var("a")), _bound("a")),
    Rule("select(p, true, false) → p", op("select", var("p"), splat(_is_true), splat(_is_false)), _bound("p")),
    Rule("select(p, false, true) → not(p)", op("select", var("p"), splat(_is_false), splat(_is_true)),
         lambda m: m.add("not", [m["p"]], shape=m.root.shape)),
    Rule("select(not(p), a, b) → select(p, b, a)", op("select", op("not", var("p")), var("a"), var("b")), _swap_select),
    # conversions
    Rule("convert(x) to x's type → x", op("convert", var("x"), where=_same_element_type), _x),
    Rule("convert(convert(x)) → convert(x) or x  [exact inner convert]",
         op("convert", op("convert", var("x"), bind="inner")), _convert_of_exact_convert),
    Rule("bitcast-convert(x) to x's type → x", op("bitcast-convert", var("x"), where=_same_element_type), _x),
    Rule("bitcast-convert(bitcast-convert(x)) back to x's shape → x",
         op("bitcast-convert", op("bitcast-convert", var("x"))), _bitcast_convert_round_trip),
    Rule("reduce-precision(x) keeping every bit → x", op("reduce-precision", var("x"), where=_keeps_all_bits), _x),
)
