"""Reference evaluation of the elementwise ops: every opcode whose category is "unary", "binary" or
"ternary", plus bitcast-convert.

Semantics are XLA's (docs/operation_semantics.md, HloEvaluator); each evaluation's docstring
states its edge cases. The rules that all of them share:
  - Integer results wrap (two's complement) to the type's width, sub-byte types included.
  - Floats narrower than f32 compute in f32 and round once, to nearest even, to their type.
    Transcendental functions of f32 and narrower compute in f64 and round to f32 (so they are
    within 1 ulp of the C library's float functions HloEvaluator calls); complex64 ones compute in
    complex128.
  - Operands may be arrays of any (equal) shape even where the instruction's shape is a scalar:
    sub-computations of reduce/sort/scatter/map are evaluated on whole arrays at once. Only the
    element type of `instr.shape` is used, never its dimensions.

The numeric machinery (types, wrapping, rounding, convert, reduce-precision, erf) lives in
evaluator/numerics.py; this module maps each opcode to it."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from hlocc.errors import UnsupportedError
from hlocc.evaluator import complex_math
from hlocc.evaluator import numerics as nx
from hlocc.evaluator.complex_math import complex_expm1, complex_log, complex_log1p, complex_power, complex_sqrt
from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.opcodes import register_evaluator
from hlocc.hlo.types import PrimitiveType

_C128 = np.complex128


def _elementwise(*opcodes: str):
    """Register `fn(instr, *operand_arrays) -> array` as the evaluation of `opcodes`, with numpy's
    floating-point warnings off (XLA defines the results, e.g. inf for 1/0)."""

    def wrap(fn: Callable[..., np.ndarray]):
        @functools.wraps(fn)
        def evaluate(instr: HloInstruction, operands: list[Any], ev: Any) -> np.ndarray:
            with np.errstate(all="ignore"):
                return fn(instr, *(np.asarray(v) for v in operands))

        register_evaluator(*opcodes)(evaluate)
        return evaluate

    return wrap


def _unsupported(instr: HloInstruction, pt: PrimitiveType) -> UnsupportedError:
    return UnsupportedError(f"{instr.opcode} is not defined for element type {pt} (instruction '{instr.name}')")


def _result_type(instr: HloInstruction) -> PrimitiveType:
    return instr.shape.element_type


# -- float and complex functions ----------------------------------------------------------------


def _logistic(x: np.ndarray) -> np.ndarray:
    return complex_math.reciprocal(1.0 + np.exp(-x))


def _rsqrt(x: np.ndarray) -> np.ndarray:
    return complex_math.reciprocal(complex_sqrt(x) if np.iscomplexobj(x) else np.sqrt(x))


def _round_half_away(x: np.ndarray) -> np.ndarray:
    """C's round(): halves go away from zero; the sign of zero is kept (round(-0.3) = -0.0)."""
    truncated = np.trunc(x)
    return np.where(np.abs(x - truncated) >= 0.5, truncated + np.copysign(1.0, x), truncated)


# opcode: (function on f64 arrays, function on complex128 arrays or None, docstring)
_FLOAT_FUNCTIONS: dict[str, tuple[Callable, Callable | None, str]] = {
    "exponential": (np.exp, np.exp, "e^x; exp(-inf) = 0, overflow gives +inf."),
    "exponential-minus-one": (np.expm1, complex_expm1,
                              "e^x - 1, accurate near 0; expm1(-inf) = -1, expm1(-0.0) = -0.0."),
    "log": (np.log, complex_log, "Natural log; log(0) = -inf, log(x < 0) = NaN, log(inf) = inf."),
    "log-plus-one": (np.log1p, complex_log1p,
                     "log(1 + x), accurate near 0; log1p(-1) = -inf, log1p(x < -1) = NaN, log1p(-0.0) = -0.0."),
    "logistic": (_logistic, _logistic,
                 "1 / (1 + e^-x) (HloEvaluator's formula); logistic(-inf) = 0, logistic(inf) = 1."),
    "sqrt": (np.sqrt, complex_sqrt, "Square root; sqrt(-0.0) = -0.0, sqrt(x < 0) = NaN."),
    "rsqrt": (_rsqrt, _rsqrt, "1 / sqrt(x); rsqrt(+0) = +inf, rsqrt(-0.0) = -inf, rsqrt(x < 0) = NaN."),
    "cbrt": (nx.cbrt, None, "Real cube root; cbrt(-8) = -2, cbrt(-0.0) = -0.0."),
    "sine": (np.sin, np.sin, "sin(x); sin(±inf) = NaN."),
    "cosine": (np.cos, np.cos, "cos(x); cos(±inf) = NaN."),
    "tan": (np.tan, np.tan, "tan(x); tan(±inf) = NaN."),
    "tanh": (np.tanh, np.tanh, "tanh(x); tanh(±inf) = ±1, tanh(-0.0) = -0.0."),
    "acos": (np.arccos, None, "arccos(x) in [0, pi]; NaN outside [-1, 1]."),
    "asin": (np.arcsin, None, "arcsin(x) in [-pi/2, pi/2]; NaN outside [-1, 1]."),
    "acosh": (np.arccosh, None, "arccosh(x); NaN below 1, acosh(1) = 0."),
    "asinh": (np.arcsinh, None, "arcsinh(x); odd, asinh(±inf) = ±inf."),
    "atanh": (np.arctanh, None, "arctanh(x); atanh(±1) = ±inf, NaN outside [-1, 1]."),
    "cosh": (np.cosh, None, "cosh(x); overflow gives +inf."),
    "sinh": (np.sinh, None, "sinh(x); odd, overflow gives ±inf."),
    "erf": (nx.erf, None, "The error function, within 2 ulp in f64; erf(±inf) = ±1, erf(-0.0) = -0.0."),
    "ceil": (np.ceil, None, "Round toward +inf; ceil(-0.5) = -0.0; NaN and ±inf unchanged."),
    "floor": (np.floor, None, "Round toward -inf; floor(-0.0) = -0.0; NaN and ±inf unchanged."),
    "round-nearest-afz": (_round_half_away, None,
                          "Round to nearest, halves away from zero (C round): 2.5 → 3, -2.5 → -3, "
                          "-0.4 → -0.0."),
    "round-nearest-even": (np.rint, None, "Round to nearest, halves to even: 2.5 → 2, 3.5 → 4, -0.5 → -0.0."),
}


def _float_function(real_fn: Callable, complex_fn: Callable | None, doc: str):
    def evaluate(instr: HloInstruction, x: np.ndarray) -> np.ndarray:
        pt = nx.ptype_of(x)
        if pt.is_float:
            return nx.round_float(real_fn(x.astype(np.float64)), pt)
        if pt.is_complex and complex_fn is not None:
            return np.asarray(complex_fn(x.astype(_C128))).astype(pt.dtype)
        raise _unsupported(instr, pt)

    evaluate.__doc__ = (doc + " Floats (f32 and narrower compute in f64)"
                        + (" and complex numbers." if complex_fn is not None else " only."))
    return evaluate


for _opcode, (_real, _complex, _doc) in _FLOAT_FUNCTIONS.items():
    _elementwise(_opcode)(_float_function(_real, _complex, _doc))


@_elementwise("is-finite")
def is_finite(instr: HloInstruction, x: np.ndarray) -> np.ndarray:
    """pred: true unless x is ±inf or NaN. Floats only."""
    pt = nx.ptype_of(x)
    if not pt.is_float:
        raise _unsupported(instr, pt)
    return np.asarray(np.isfinite(nx.as_float(x, pt)))


# -- other unary ops ----------------------------------------------------------------------------


@_elementwise("abs")
def abs_(instr: HloInstruction, x: np.ndarray) -> np.ndarray:
    """|x|. Signed ints wrap: abs(INT_MIN) = INT_MIN (abs(s4 -8) = -8); unsigned ints are unchanged;
    floats clear the sign bit (abs(-0.0) = +0.0, abs(-NaN) = NaN); complex gives the modulus in
    the component type (hypot, no intermediate overflow), NaN if a part is NaN (XLA:CPU's
    abs(NaN + inf i) = NaN; C99 says inf)."""
    pt = nx.ptype_of(x)
    if pt.is_integer:
        return nx.wrap_int(np.abs(nx.as_int(x, pt)), pt)
    if pt.is_float:
        return nx.round_float(np.abs(nx.as_float(x, pt)), pt)
    if pt.is_complex:
        z = x.astype(_C128)
        modulus = np.where(np.isnan(z.real) | np.isnan(z.imag), np.nan, np.abs(z))
        return nx.round_float(modulus, nx.component_type(pt))
    raise _unsupported(instr, pt)


@_elementwise("negate")
def negate(instr: HloInstruction, x: np.ndarray) -> np.ndarray:
    """-x. Ints wrap: negate(INT_MIN) = INT_MIN, unsigned negate(x) = 2^n - x; floats flip the sign
    bit (negate(0.0) = -0.0, NaN stays NaN)."""
    pt = nx.ptype_of(x)
    if pt.is_integer:
        return nx.wrap_int(np.negative(nx.as_int(x, pt)), pt)
    if pt.is_float:
        return nx.round_float(np.negative(nx.as_float(x, pt)), pt)
    if pt.is_complex:
        return np.negative(x)
    raise _unsupported(instr, pt)


@_elementwise("sign")
def sign(instr: HloInstruction, x: np.ndarray) -> np.ndarray:
    """-1, 0 or 1 for ints (0 or 1 for unsigned). Floats: ±1.0, ±0.0 keeps its sign
    (sign(-0.0) = -0.0), NaN gives NaN. Complex: each part divided by |x| (XLA:CPU's: sign(1e30)
    = 1 exactly, sign(inf + 0i) = NaN + 0i), and x itself for 0 (sign(-0 + 0i) = -0 + 0i)."""
    pt = nx.ptype_of(x)
    if pt.is_integer:
        v = nx.as_int(x, pt)
        return nx.wrap_int((v > 0).astype(v.dtype) - (v < 0).astype(v.dtype), pt)
    if pt.is_float:
        v = nx.as_float(x, pt)
        return nx.round_float(np.where(np.isnan(v), v, np.copysign((v != 0).astype(v.dtype), v)), pt)
    if pt.is_complex:
        z = x.astype(_C128)
        modulus = np.where(np.isnan(z.real) | np.isnan(z.imag), np.nan, np.abs(z))
        quotient = np.empty(z.shape, _C128)
        quotient.real, quotient.imag = z.real / modulus, z.imag / modulus
        return np.where(modulus == 0, z, quotient).astype(pt.dtype)
    raise _unsupported(instr, pt)


@_elementwise("not")
def not_(instr: HloInstruction, x: np.ndarray) -> np.ndarray:
    """Logical not for pred, bitwise complement (within the type's width) for ints."""
    pt = nx.ptype_of(x)
    if pt.is_pred:
        return np.logical_not(x)
    if pt.is_integer:
        return nx.wrap_int(np.invert(nx.as_int(x, pt)), pt)
    raise _unsupported(instr, pt)


@_elementwise("popcnt")
def popcnt(instr: HloInstruction, x: np.ndarray) -> np.ndarray:
    """Number of set bits in the type's width (popcnt(s8 -1) = 8, popcnt(s4 -1) = 4). Ints only."""
    pt = nx.ptype_of(x)
    if not pt.is_integer:
        raise _unsupported(instr, pt)
    return nx.wrap_int(np.bitwise_count(nx.to_bits(x, pt)), pt)


@_elementwise("count-leading-zeros")
def count_leading_zeros(instr: HloInstruction, x: np.ndarray) -> np.ndarray:
    """Leading zero bits in the type's width: clz(0) = width, clz(negative) = 0 (LLVM's ctlz, as
    XLA:CPU emits; HloEvaluator sign-extends narrow negatives first, which we do not copy)."""
    pt = nx.ptype_of(x)
    if not pt.is_integer:
        raise _unsupported(instr, pt)
    return nx.wrap_int(pt.bits - nx.bit_length(nx.to_bits(x, pt)), pt)


@_elementwise("real")
def real(instr: HloInstruction, x: np.ndarray) -> np.ndarray:
    """The real part of a complex number (in the component type); a float is its own real part."""
    pt = nx.ptype_of(x)
    if pt.is_complex:
        return x.real.copy()
    if pt.is_float:
        return x.copy()
    raise _unsupported(instr, pt)


@_elementwise("imag")
def imag(instr: HloInstruction, x: np.ndarray) -> np.ndarray:
    """The imaginary part of a complex number; 0 for a float."""
    pt = nx.ptype_of(x)
    if pt.is_complex:
        return x.imag.copy()
    if pt.is_float:
        return np.zeros(x.shape, pt.dtype)
    raise _unsupported(instr, pt)


def _copy_value(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_copy_value(v) for v in value)
    if isinstance(value, np.ndarray) or np.isscalar(value):
        return np.array(value, copy=True)
    return value  # a token


@register_evaluator("copy")
def copy(instr: HloInstruction, operands: list[Any], ev: Any) -> Any:
    """A new array with the operand's values (tuples are copied element by element)."""
    return _copy_value(operands[0])


@_elementwise("convert")
def convert(instr: HloInstruction, x: np.ndarray) -> np.ndarray:
    """Element type conversion (XLA's literal.cc / elemental emitter):
    - float → int truncates toward zero and saturates to the int's range; NaN → 0
      (f32 3e9 → s32 2147483647, -inf → INT_MIN, -0.7 → u8 0);
    - int → int keeps the low bits (wraps: s32 300 → s8 44, s8 -1 → u8 255, → s4 keeps 4 bits);
    - anything → pred is x != 0 (NaN → true); pred → number is 0 or 1;
    - int → float rounds to nearest even (through f32 for types narrower than f32);
    - float → narrower float rounds to nearest even; overflow gives ±inf, or NaN for the f8/f4
      types without inf (fn, fnuz), as ml_dtypes does; f64 reaches types narrower than f32
      through f32 (as XLA does; this can round twice);
    - real → complex sets the imaginary part to 0; complex → complex rounds each part;
      complex → real takes the real part (XLA's verifier rejects it; kept for leniency)."""
    return nx.convert(x, nx.ptype_of(x), _result_type(instr))


@_elementwise("bitcast-convert")
def bitcast_convert(instr: HloInstruction, x: np.ndarray) -> np.ndarray:
    """Reinterpret each element's bits as the result type. Equal widths keep the shape. A wider
    operand splits into width ratio elements along a new minor dimension; a narrower one fuses
    its minor dimension (whose size must be the ratio). The pieces are little-endian: index 0 of
    the minor dimension holds the least significant bits (f32 1.0 → u8 [0, 0, 128, 63])."""
    return nx.bitcast_convert(x, nx.ptype_of(x), _result_type(instr))


@_elementwise("reduce-precision")
def reduce_precision(instr: HloInstruction, x: np.ndarray) -> np.ndarray:
    """Round to a float format with `exponent_bits` and `mantissa_bits` and back, on the value's
    own bits (XLA's EmitReducePrecisionIR; f8/f4 types go through f32): mantissa rounded to
    nearest even; exponents above the format's maximum give ±inf, exponents at or below its
    minimum normal give ±0 (denormals are flushed); NaN stays the same NaN, also when
    mantissa_bits is 0 (XLA:CPU's result). f16 keeps its own subnormals when exponent_bits >= 5 (HloEvaluator, which
    goes through f32, flushes them; XLA:CPU does not)."""
    pt = nx.ptype_of(x)
    if not pt.is_float:
        raise _unsupported(instr, pt)
    return nx.reduce_precision(x, pt, int(instr.attrs["exponent_bits"]), int(instr.attrs["mantissa_bits"]))


# -- binary arithmetic --------------------------------------------------------------------------


def _arithmetic(int_fn: Callable | None, float_fn: Callable | None, complex_fn: Callable | None = None,
                pred_fn: Callable | None = None):
    """An evaluation of a same-type binary op from its per-kind functions. `int_fn(a, b, pt)`
    gets values in the integer compute dtype and its result is wrapped; `float_fn(a, b)` gets f32
    (narrow floats) or the own dtype and its result is rounded once to the type."""

    def evaluate(instr: HloInstruction, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        pt = nx.ptype_of(a)
        if pt.is_integer and int_fn is not None:
            return nx.wrap_int(int_fn(nx.as_int(a, pt), nx.as_int(b, pt), pt), pt)
        if pt.is_float and float_fn is not None:
            return nx.round_float(float_fn(nx.as_float(a, pt), nx.as_float(b, pt)), pt)
        if pt.is_complex and complex_fn is not None:
            return np.asarray(complex_fn(a, b)).astype(pt.dtype)
        if pt.is_pred and pred_fn is not None:
            return np.asarray(pred_fn(a, b))
        raise _unsupported(instr, pt)

    return evaluate


def _typed(value: int, like: np.ndarray) -> np.ndarray:
    return np.array(value).astype(like.dtype)


def _int_divide(a: np.ndarray, b: np.ndarray, pt: PrimitiveType) -> np.ndarray:
    zero = b == 0
    lo, hi = nx.int_bounds(pt)
    if pt.is_unsigned:
        return np.where(zero, _typed(hi, a), a // np.where(zero, _typed(1, b), b))
    overflow = (a == lo) & (b == -1)
    safe = np.where(zero | overflow, _typed(1, b), b)
    quotient = (a - np.fmod(a, safe)) // safe  # exact: truncating division
    return np.where(zero, _typed(-1, a), np.where(overflow, a, quotient))


def _int_remainder(a: np.ndarray, b: np.ndarray, pt: PrimitiveType) -> np.ndarray:
    zero = b == 0
    if pt.is_unsigned:
        return np.where(zero, a, a % np.where(zero, _typed(1, b), b))
    overflow = (a == nx.int_bounds(pt)[0]) & (b == -1)
    safe = np.where(zero | overflow, _typed(1, b), b)
    return np.where(zero, a, np.where(overflow, _typed(0, a), np.fmod(a, safe)))


def _int_power(base: np.ndarray, exponent: np.ndarray, pt: PrimitiveType) -> np.ndarray:
    """XLA:CPU's integer power (EmitIntegerPow), modulo 2^n: squaring over the exponent's low 6
    bits only (2^65 = 2, 3^64 = 1: XLA stops there, since any larger power of a base other than
    0 and ±1 overflows 64 bits). An exponent negative as a *signed* number (for unsigned types
    too: u8 3^128 = 0) gives 1 for base 1, ±1 for base -1 (all ones) by the exponent's parity,
    else 0."""
    base, exponent = np.broadcast_arrays(base, exponent)
    wide = exponent.astype(np.uint64)  # sign-extended for signed types
    negative = ((wide >> np.uint64(pt.bits - 1)) & np.uint64(1)) != 0
    bits = wide & np.uint64(63)
    result = np.ones(base.shape, base.dtype)
    square = base.copy()
    for _ in range(6):
        result = np.where((bits & np.uint64(1)) != 0, result * square, result)
        bits = bits >> np.uint64(1)
        square = square * square
    minus_one = base == _typed(-1 if pt.is_signed else nx.int_bounds(pt)[1], base)
    odd = (exponent & _typed(1, exponent)) != 0
    one = np.ones(base.shape, base.dtype)
    negative_power = np.where(base == 1, one, np.where(minus_one, np.where(odd, base, one), 0 * one))
    return np.where(negative, negative_power, result)


def _float_power(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    result = np.power(a.astype(np.float64), b.astype(np.float64))
    return np.where((a == 1) | (b == 0), 1.0, result)  # 1^NaN = NaN^0 = 1 (C pow agrees)


_ADD_DOC = ("Ints wrap; floats are IEEE (narrow floats in f32, rounded once). pred is a 1-bit unsigned "
            "integer, as XLA's compiled backends emit it (LLVM i1): add and subtract are xor, multiply is and.")
_BINARY: dict[str, tuple[Callable, str]] = {
    "add": (_arithmetic(lambda a, b, pt: a + b, np.add, np.add, np.logical_xor), f"x + y. {_ADD_DOC}"),
    "subtract": (_arithmetic(lambda a, b, pt: a - b, np.subtract, np.subtract, np.logical_xor), f"x - y. {_ADD_DOC}"),
    "multiply": (_arithmetic(lambda a, b, pt: a * b, np.multiply, np.multiply, np.logical_and), f"x * y. {_ADD_DOC}"),
    "divide": (_arithmetic(_int_divide, np.divide, complex_math.complex_divide, lambda a, b: a | ~b),
               "x / y. Ints truncate toward zero; signed x / 0 = -1, INT_MIN / -1 = INT_MIN, unsigned "
               "x / 0 = all ones (2^n - 1). Floats are IEEE: x / ±0 = ±inf, 0 / 0 = NaN. Complex: Smith's "
               "division with XLA's cases for zero and infinite parts (complex_math.complex_divide). pred "
               "(1-bit unsigned): x / 1 = x, x / 0 = true."),
    "remainder": (_arithmetic(_int_remainder, np.fmod, None, lambda a, b: a & ~b),
                  "x - trunc(x / y) * y: the result has the dividend's sign (C's % and fmod), e.g. "
                  "-7 rem 2 = -1, 7 rem -2 = 1. Ints: x rem 0 = x, INT_MIN rem -1 = 0. Floats: fmod, "
                  "exact; x rem 0 = NaN, inf rem y = NaN, x rem inf = x. Not defined for complex. pred: x rem 1 = 0, "
                  "x rem 0 = x."),
    "power": (_arithmetic(_int_power, _float_power, complex_power, lambda a, b: a | ~b),
              "x^y. x^0 = 1 and 1^y = 1 for every y (NaN included). Ints (XLA:CPU's rule): modulo 2^n over "
              "the exponent's low 6 bits (2^65 = 2); an exponent negative as a signed number gives 1 "
              "for x = 1, ±1 for x = -1 by its parity, else 0. Floats: C pow "
              "(0^-1 = inf, (-8)^(1/3) = NaN). pred: x or not y."),
}

for _opcode, (_fn, _doc) in _BINARY.items():
    _fn.__doc__ = _doc
    _elementwise(_opcode)(_fn)


def _select_by(mask_fn: Callable, a: np.ndarray, b: np.ndarray, pt: PrimitiveType) -> np.ndarray:
    """Pick a or b by comparing their values (exactly, in a dtype numpy compares), keeping the
    chosen element's bits (NaN payloads, signed zeros)."""
    ca, cb = nx.comparable(a, pt), nx.comparable(b, pt)
    pick = mask_fn(ca, cb)
    if pt.is_float:
        pick = np.where(np.isnan(cb), False, pick)
        pick = np.where(np.isnan(ca), True, pick)
    return np.where(pick, a, b)


@_elementwise("maximum")
def maximum(instr: HloInstruction, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The larger of x and y. Floats propagate NaN (x if x is NaN, else y if y is NaN); on equal
    values x is returned, so max(-0.0, +0.0) = -0.0 and max(+0.0, -0.0) = +0.0 (HloEvaluator's
    std::max; XLA:CPU's llvm.maximum gives +0.0 for both, see codegen/elemental/ops.py for why
    hlocc does not). pred: or. Not defined for complex."""
    pt = nx.ptype_of(a)
    if pt.is_complex:
        raise _unsupported(instr, pt)
    return _select_by(lambda x, y: ~(x < y), a, b, pt)


@_elementwise("minimum")
def minimum(instr: HloInstruction, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The smaller of x and y. Floats propagate NaN (x if x is NaN, else y if y is NaN); on equal
    values x is returned, so min(-0.0, +0.0) = -0.0 and min(+0.0, -0.0) = +0.0. pred: and. Not
    defined for complex."""
    pt = nx.ptype_of(a)
    if pt.is_complex:
        raise _unsupported(instr, pt)
    return _select_by(lambda x, y: ~(y < x), a, b, pt)


def _ieee_max_min(a: np.ndarray, b: np.ndarray, pt: PrimitiveType, larger: bool) -> np.ndarray:
    """IEEE 754-2019 maximum (`larger`) or minimum of floats: NaN propagates (a's first), -0 < +0."""
    if larger:
        return _select_by(lambda x, y: (x > y) | ((x == y) & ~np.signbit(x)), a, b, pt)
    return _select_by(lambda x, y: (x < y) | ((x == y) & np.signbit(x)), a, b, pt)


def _bitwise(name: str, logical: Callable, bitwise: Callable) -> Callable:
    def evaluate(instr: HloInstruction, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        pt = nx.ptype_of(a)
        if pt.is_pred:
            return np.asarray(logical(a, b))
        if pt.is_integer:
            return nx.wrap_int(bitwise(nx.as_int(a, pt), nx.as_int(b, pt)), pt)
        raise _unsupported(instr, pt)

    evaluate.__doc__ = f"Logical {name} for pred, bitwise {name} for ints."
    return evaluate


_elementwise("and")(_bitwise("and", np.logical_and, np.bitwise_and))
_elementwise("or")(_bitwise("or", np.logical_or, np.bitwise_or))
_elementwise("xor")(_bitwise("xor", np.logical_xor, np.bitwise_xor))


def _shift_operands(instr: HloInstruction, a: np.ndarray, b: np.ndarray):
    """(type, values of a, shift amounts, out-of-bounds mask). The amount is read as an unsigned
    number of the type's width, so negative amounts are out of bounds like amounts >= width."""
    pt = nx.ptype_of(a)
    if not pt.is_integer:
        raise _unsupported(instr, pt)
    amount = nx.to_bits(b, pt)
    out_of_bounds = amount >= np.uint64(pt.bits)
    values = nx.as_int(a, pt)
    return pt, values, np.where(out_of_bounds, 0, amount).astype(values.dtype), out_of_bounds


@_elementwise("shift-left")
def shift_left(instr: HloInstruction, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """x << y within the type's width (bits shifted out are lost); y >= width or y < 0 gives 0."""
    pt, values, amount, out_of_bounds = _shift_operands(instr, a, b)
    shifted = np.left_shift(values, amount)
    return nx.wrap_int(np.where(out_of_bounds, _typed(0, shifted), shifted), pt)


@_elementwise("shift-right-arithmetic")
def shift_right_arithmetic(instr: HloInstruction, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """x >> y filling with the sign bit (x read as signed, for unsigned types too); y >= width or
    y < 0 gives all sign bits: -1 for negative x, 0 otherwise."""
    pt, values, amount, out_of_bounds = _shift_operands(instr, a, b)
    signed = nx.wrap_int(values, nx.signed_twin(pt))
    signed = nx.as_int(signed, nx.signed_twin(pt))
    shifted = np.right_shift(signed, amount.astype(signed.dtype))
    sign_fill = np.where(signed < 0, _typed(-1, signed), _typed(0, signed))
    return nx.wrap_int(np.where(out_of_bounds, sign_fill, shifted), pt)


@_elementwise("shift-right-logical")
def shift_right_logical(instr: HloInstruction, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """x >> y filling with zeros (x read as unsigned, for signed types too, so s8 -1 >> 1 = 127);
    y >= width or y < 0 gives 0."""
    pt, values, amount, out_of_bounds = _shift_operands(instr, a, b)
    unsigned = nx.as_int(nx.wrap_int(values, nx.unsigned_twin(pt)), nx.unsigned_twin(pt))
    shifted = np.right_shift(unsigned, amount.astype(unsigned.dtype))
    return nx.wrap_int(np.where(out_of_bounds, _typed(0, shifted), shifted), pt)


@_elementwise("atan2")
def atan2(instr: HloInstruction, y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """atan2(lhs, rhs): the angle of the point (rhs, lhs), in [-pi, pi]; C's special cases
    (atan2(±0, -0) = ±pi, atan2(±0, +0) = ±0, atan2(±inf, ±inf) = ±pi/4 or ±3pi/4). Complex:
    -i log((x + iy) / sqrt(x² + y²)), HloEvaluator's formula, with the complex sqrt and log of
    this module."""
    pt = nx.ptype_of(y)
    if pt.is_float:
        return nx.round_float(np.arctan2(y.astype(np.float64), x.astype(np.float64)), pt)
    if pt.is_complex:
        zy, zx = y.astype(_C128), x.astype(_C128)
        quotient = complex_math.complex_divide(zx + 1j * zy, complex_sqrt(zx * zx + zy * zy))
        return (-1j * complex_log(quotient)).astype(pt.dtype)
    raise _unsupported(instr, pt)


@_elementwise("complex")
def complex_(instr: HloInstruction, re: np.ndarray, im: np.ndarray) -> np.ndarray:
    """The complex number re + i·im (f32 parts → c64, f64 → c128); the parts are stored as given,
    so complex(inf, 0) is inf + 0i (no inf·0 NaN)."""
    pt = nx.ptype_of(re)
    if pt.name not in ("f32", "f64"):
        raise _unsupported(instr, pt)
    re, im = np.broadcast_arrays(re, im)
    out = np.empty(re.shape, np.complex64 if pt.name == "f32" else _C128)
    out.real, out.imag = re, im
    return out


_DIRECTIONS: dict[str, Callable] = {
    "EQ": np.equal, "NE": np.not_equal, "GE": np.greater_equal,
    "GT": np.greater, "LE": np.less_equal, "LT": np.less,
}


@_elementwise("compare")
def compare(instr: HloInstruction, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """pred: x `direction` y, direction one of EQ NE GE GT LE LT. Ints compare signed or unsigned
    by their element type, pred as false < true. Floats use IEEE partial order by default (NaN
    compares false, except NE which is true; -0.0 == +0.0); with type=TOTALORDER they use
    -NaN < -inf < ... < -0.0 < +0.0 < ... < inf < NaN, ordered by sign-magnitude bits, where EQ
    means equal bits. Complex supports EQ and NE only."""
    direction = str(instr.attrs["direction"]).upper()
    op = _DIRECTIONS.get(direction)
    if op is None:
        raise UnsupportedError(f"unknown compare direction '{direction}' (instruction '{instr.name}')")
    pt = nx.ptype_of(a)
    if pt.is_complex:
        if direction not in ("EQ", "NE"):
            raise UnsupportedError(f"compare {direction} is not defined for {pt} (instruction '{instr.name}')")
        return np.asarray(op(a, b))
    if pt.is_float and str(instr.attrs.get("type", "")).upper() == "TOTALORDER":
        return np.asarray(op(nx.total_order_key(a, pt), nx.total_order_key(b, pt)))
    return np.asarray(op(nx.comparable(a, pt), nx.comparable(b, pt)))


@_elementwise("stochastic-convert")
def stochastic_convert(instr: HloInstruction, x: np.ndarray, random: np.ndarray) -> np.ndarray:
    """Round float x to the integer result type stochastically with `random`, an unsigned integer
    of x's width: |x| rounds up when random < frac(|x|)·2^width (truncated), then the sign is
    restored; x at or beyond the type's range saturates (±inf included); NaN gives 0."""
    return nx.stochastic_convert(x, random, nx.ptype_of(x), nx.ptype_of(random), _result_type(instr))


# -- ternary ------------------------------------------------------------------------------------


@_elementwise("select")
def select(instr: HloInstruction, pred: np.ndarray, on_true: np.ndarray, on_false: np.ndarray) -> np.ndarray:
    """on_true where pred, else on_false; a scalar pred picks a whole operand."""
    return np.where(pred.astype(bool), on_true, on_false)


@_elementwise("clamp")
def clamp(instr: HloInstruction, low: np.ndarray, x: np.ndarray, high: np.ndarray) -> np.ndarray:
    """min(max(x, low), high) with IEEE 754-2019's maximum and minimum, as XLA:CPU: unlike the
    `maximum` and `minimum` ops here, -0 < +0 (clamp(-1, -0, +0) = -0, clamp(+0, -0, 1) = +0).
    low and high may be scalars. A NaN in low, else in x, else in high is the result; when
    low > high the result is high. Not defined for complex."""
    pt = nx.ptype_of(x)
    if pt.is_complex or pt.is_pred:
        raise _unsupported(instr, pt)
    low, x, high = np.broadcast_arrays(low, x, high)
    if not pt.is_float:
        cl, cx, ch = (nx.comparable(v, pt) for v in (low, x, high))
        lifted = np.where(cx < cl, low, x)
        return np.where(np.where(cx < cl, cl, cx) < ch, lifted, high)
    result = _ieee_max_min(_ieee_max_min(x, low, pt, True), high, pt, False)
    result = np.where(np.isnan(nx.comparable(x, pt)), x, result)
    return np.where(np.isnan(nx.comparable(low, pt)), low, result)
