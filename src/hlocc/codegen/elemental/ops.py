"""Elemental emission: each elementwise HLO op as arith/math ops on scalars (XLA's
elemental_hlo_to_mlir.cc): one registry entry (registry.py) per opcode; the element emitter
(element_emitter.py) handles the index ops (index_ops.py: broadcast, transpose, slice, ...) through
indexing maps and calls into this registry for the scalar work.

Numerics follow XLA (and hlocc's evaluator, which is tested against XLA:CPU):
- integer divide by zero gives -1 (all ones for unsigned); INT_MIN / -1 gives INT_MIN; remainder
  by zero gives the dividend; INT_MIN % -1 gives 0 (no undefined behaviour reaches LLVM);
- shifts by ≥ the bit width give 0, or the sign fill for shift-right-arithmetic;
- float → int conversion saturates at the type's bounds and maps NaN to 0; float → pred is
  `x != 0` (NaN is true); int → pred is `x != 0`;
- maximum/minimum propagate NaN and give x on equal values (max(-0, +0) = -0), as HloEvaluator's
  std::max; XLA:CPU orders -0 < +0 (llvm.maximum), which made a row max reduction 1.6x slower
  here (docs/architecture.md, edge values); clamp is IEEE 754-2019's min(max(x, lo), hi), as
  XLA:CPU's (-0 < +0 there);
- compare: ordered predicates except NE (unordered), TOTALORDER compares the sign-magnitude bits;
- integer power by squaring; a negative exponent gives 0 except for base 1 (which gives 1);
- bf16/f16/f8 are emitted on their own type here; `lower-narrow-floats` computes them in f32 with
  one rounding per op, as XLA's float normalization does; functions made of several ops (sign,
  is-finite, reduce-precision on f8, the compositions of math_functions.py) compute in f32 and
  round once; conversions to and from narrow types go through f32, as XLA's do;
- ops on complex numbers are emitted by their own registry (complex.py, `ELEMENTAL_COMPLEX`):
  an op with a complex operand or result that has no entry there raises UnsupportedError.
Transcendentals become math ops; `expand-float-ops` turns them into polynomial approximations.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import Float8E8M0FNUType, IntegerAttr, IntegerType, f32
from xdsl.ir import Attribute, SSAValue

from hlocc.codegen.elemental.complex_values import create, parts
from hlocc.codegen.elemental.registry import ScalarEmitter, in_type, out_type, register, register_complex, unsupported
from hlocc.codegen.ir import RemFOp
from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.ir.mlir_types import element_type
from hlocc.evaluator.numerics import rounds_once_through_f32
from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.shape_rules_common import complex_component_type
from hlocc.hlo.types import F32, PrimitiveType


def _bits(t: Attribute) -> int:
    return t.width.data if isinstance(t, IntegerType) else 0


def _int_min(bits: int) -> int:
    return -(1 << (bits - 1))


def _int_bounds(pt: PrimitiveType) -> tuple[int, int]:
    if pt.is_signed:
        return _int_min(pt.bits), (1 << (pt.bits - 1)) - 1
    return 0, (1 << pt.bits) - 1


# -- arithmetic -------------------------------------------------------------------------------------

BinaryEmitter = Callable[[KernelBuilder, SSAValue, SSAValue], SSAValue]


def _op(op_class) -> BinaryEmitter:
    return lambda b, x, y: b.op(op_class, x, y)


def _binary(float_op: BinaryEmitter | None, int_op: BinaryEmitter, uint_op: BinaryEmitter | None = None):
    def emit(b: KernelBuilder, instr: HloInstruction, args: Sequence[SSAValue]) -> SSAValue:
        t = in_type(instr)
        if t.is_float:
            return float_op(b, *args)
        op = uint_op if (uint_op is not None and (t.is_unsigned or t.is_pred)) else int_op
        return op(b, *args)
    return emit


register("add")(_binary(_op(arith.AddfOp), _op(arith.AddiOp)))
register("subtract")(_binary(_op(arith.SubfOp), _op(arith.SubiOp)))
register("multiply")(_binary(_op(arith.MulfOp), _op(arith.MuliOp)))
def _float_max_min(pred: str) -> BinaryEmitter:
    """x where `x pred y` (oge for max, ole for min) or x is NaN, else y: NaN propagates and equal
    values give x, so max(-0, +0) = -0 (HloEvaluator's std::max). XLA:CPU's llvm.maximum orders
    -0 below +0 (max(-0, +0) = +0); arith.maximumf would match it but made a row max reduction
    (2048x1024 f32) 0.35 -> 0.54 ms (XLA 0.41), for a difference no tolerance sees."""
    def emit(b: KernelBuilder, x: SSAValue, y: SSAValue) -> SSAValue:
        return b.select(b.op(arith.OrIOp, b.cmpf(pred, x, y), b.cmpf("uno", x, x)), x, y)
    return emit


register("maximum")(_binary(_float_max_min("oge"), _op(arith.MaxSIOp), _op(arith.MaxUIOp)))
register("minimum")(_binary(_float_max_min("ole"), _op(arith.MinSIOp), _op(arith.MinUIOp)))
register("and")(_binary(None, _op(arith.AndIOp)))
register("or")(_binary(None, _op(arith.OrIOp)))
register("xor")(_binary(None, _op(arith.XOrIOp)))


@register("divide")
def _divide(b, instr, args):
    x, y = args
    t = in_type(instr)
    if t.is_float:
        return b.op(arith.DivfOp, x, y)
    ty = x.type
    zero, one, all_ones = b.constant(0, ty), b.constant(1, ty), b.constant(-1, ty)
    y_is_zero = b.cmpi("eq", y, zero)
    if t.is_unsigned or t.is_pred:
        safe = b.select(y_is_zero, one, y)
        return b.select(y_is_zero, all_ones, b.op(arith.DivUIOp, x, safe))
    overflow = b.and_([b.cmpi("eq", x, b.constant(_int_min(_bits(ty)), ty)), b.cmpi("eq", y, all_ones)])
    bad = b.op(arith.OrIOp, y_is_zero, overflow)
    quotient = b.op(arith.DivSIOp, x, b.select(bad, one, y))
    return b.select(y_is_zero, all_ones, b.select(overflow, x, quotient))


@register("remainder")
def _remainder(b, instr, args):
    x, y = args
    t = in_type(instr)
    if t.is_float:
        return b.add(RemFOp(x, y))
    ty = x.type
    zero, one, all_ones = b.constant(0, ty), b.constant(1, ty), b.constant(-1, ty)
    y_is_zero = b.cmpi("eq", y, zero)
    if t.is_unsigned or t.is_pred:
        return b.select(y_is_zero, x, b.op(arith.RemUIOp, x, b.select(y_is_zero, one, y)))
    overflow = b.and_([b.cmpi("eq", x, b.constant(_int_min(_bits(ty)), ty)), b.cmpi("eq", y, all_ones)])
    bad = b.op(arith.OrIOp, y_is_zero, overflow)
    rem = b.op(arith.RemSIOp, x, b.select(bad, one, y))
    return b.select(y_is_zero, x, b.select(overflow, zero, rem))


def _constant_amount(value: SSAValue) -> int | None:
    """The unsigned value of an integer made by an `arith.constant` (a shift amount broadcast from
    a constant, as in threefry), else None."""
    op = value.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr) and isinstance(value.type, IntegerType):
        return op.value.value.data & ((1 << value.type.width.data) - 1)
    return None


def _shift(kind: str):
    def emit(b, instr, args):
        x, y = args
        ty = x.type
        bits = _bits(ty)
        amount = _constant_amount(y)
        if amount is not None:  # the range check folded here: a third of a threefry kernel's ops
            if amount < bits:
                return b.op({"left": arith.ShLIOp, "logical": arith.ShRUIOp}.get(kind, arith.ShRSIOp), x, y)
            if kind != "arithmetic":
                return b.constant(0, ty)
            return b.op(arith.ShRSIOp, x, b.constant(bits - 1, ty))
        in_range = b.cmpi("ult", y, b.constant(bits, ty))
        safe = b.select(in_range, y, b.constant(0, ty))
        if kind == "left":
            shifted, fill = b.op(arith.ShLIOp, x, safe), b.constant(0, ty)
        elif kind == "logical":
            shifted, fill = b.op(arith.ShRUIOp, x, safe), b.constant(0, ty)
        else:
            shifted = b.op(arith.ShRSIOp, x, safe)
            fill = b.op(arith.ShRSIOp, x, b.constant(bits - 1, ty))
        return b.select(in_range, shifted, fill)
    return emit


register("shift-left")(_shift("left"))
register("shift-right-logical")(_shift("logical"))
register("shift-right-arithmetic")(_shift("arithmetic"))


@register("negate")
def _negate(b, instr, args):
    (x,) = args
    if in_type(instr).is_float:
        return b.op(arith.NegfOp, x)
    return b.op(arith.SubiOp, b.constant(0, x.type), x)


@register("abs")
def _abs(b, instr, args):
    (x,) = args
    t = in_type(instr)
    if t.is_float:
        return b.op(math.AbsFOp, x)
    if t.is_unsigned or t.is_pred:
        return x
    return b.op(math.AbsIOp, x)


@register("sign")
def _sign(b, instr, args):
    (x,) = args
    t, ty = in_type(instr), x.type
    if t.is_float:
        return unary_in_f32(_float_sign)(b, instr, args)
    zero = b.constant(0, ty)
    if t.is_unsigned or t.is_pred:
        return b.select(b.cmpi("ne", x, zero), b.constant(1, ty), zero)
    positive = b.select(b.cmpi("sgt", x, zero), b.constant(1, ty), zero)
    return b.select(b.cmpi("slt", x, zero), b.constant(-1, ty), positive)


def _float_sign(b: KernelBuilder, x: SSAValue) -> SSAValue:
    """±1; ±0 and NaN are their own sign (in f32 for narrow types: f8e8m0fnu has no -1)."""
    zero = b.constant(0.0, x.type)
    positive = b.select(b.cmpf("ogt", x, zero), b.constant(1.0, x.type), x)
    return b.select(b.cmpf("olt", x, zero), b.constant(-1.0, x.type), positive)


@register("not")
def _not(b, instr, args):
    (x,) = args
    return b.op(arith.XOrIOp, x, b.constant(-1, x.type))


@register("popcnt")
def _popcnt(b, instr, args):
    return b.op(math.CtPopOp, args[0])


@register("count-leading-zeros")
def _count_leading_zeros(b, instr, args):
    return b.op(math.CountLeadingZerosOp, args[0])


def _float_unary(op_class):
    def emit(b, instr, args):
        if not in_type(instr).is_float:
            raise unsupported(instr, f"on {in_type(instr).name}")
        return b.add(op_class(args[0]))
    return emit


for _opcode, _op in {
    "exponential": math.ExpOp, "exponential-minus-one": math.ExpM1Op, "log": math.LogOp,
    "log-plus-one": math.Log1pOp, "tanh": math.TanhOp, "sine": math.SinOp, "cosine": math.CosOp,
    "tan": math.TanOp, "sqrt": math.SqrtOp, "rsqrt": math.RsqrtOp, "cbrt": math.CbrtOp, "erf": math.ErfOp,
    "floor": math.FloorOp, "ceil": math.CeilOp, "round-nearest-afz": math.RoundOp,
    "round-nearest-even": math.RoundEvenOp,
}.items():
    register(_opcode)(_float_unary(_op))


@register("is-finite")
def _is_finite(b, instr, args):
    """|x| != inf, ordered (false for NaN); narrow types compare in f32, where inf exists for the
    formats without one (f8e4m3fn, ...)."""
    (x,) = args
    if float_width(x.type) < 32:
        x = b.op(arith.ExtFOp, x, f32)
    return b.cmpf("one", b.op(math.AbsFOp, x), b.constant(float("inf"), x.type))


@register("atan2")
def _atan2(b, instr, args):
    return b.op(math.Atan2Op, *args)


@register("power")
def _power(b, instr, args):
    x, y = args
    t = in_type(instr)
    if t.is_float:
        return b.op(math.PowFOp, x, y)
    return _integer_power(b, x, y, signed=t.is_signed)


def _integer_power(b: KernelBuilder, x: SSAValue, y: SSAValue, signed: bool) -> SSAValue:
    """XLA:CPU's integer power (EmitIntegerPow): squaring over the exponent's low 6 bits only
    (straight-line, so it vectorizes; 2^65 = 2, 3^64 = 1). An exponent negative as a signed number,
    for unsigned types too (u8 3^128 = 0), gives 1 for x == 1, ±1 for x == -1 (all ones) by the
    exponent's parity, else 0. `signed` is unused: XLA's rule is the same for both."""
    del signed
    ty = x.type
    one, zero = b.constant(1, ty), b.constant(0, ty)
    if _bits(ty) == 1:  # pred: x or not y (the evaluator's rule; s1 has no 1, its i1 1 is -1)
        return b.op(arith.OrIOp, x, b.op(arith.XOrIOp, y, one))
    result, base, exp = one, x, y
    for _ in range(6):
        odd = b.cmpi("ne", b.op(arith.AndIOp, exp, one), zero)
        result = b.select(odd, b.op(arith.MuliOp, result, base), result)
        base = b.op(arith.MuliOp, base, base)
        exp = b.op(arith.ShRUIOp, exp, one)
    minus_one = b.constant(-1, ty)
    y_odd = b.cmpi("ne", b.op(arith.AndIOp, y, one), zero)
    negative = b.select(b.cmpi("eq", x, one), one,
                        b.select(b.cmpi("eq", x, minus_one), b.select(y_odd, minus_one, one), zero))
    return b.select(b.cmpi("slt", y, zero), negative, result)


@register("clamp")
def _clamp(b, instr, args):
    """clamp(lo, x, hi) = min(max(x, lo), hi) with the IEEE maximum and minimum, as XLA:CPU: lo > hi
    gives hi, a NaN in any operand gives NaN, and -0 < +0 (clamp(-1, -0, +0) = -0,
    clamp(+0, -0, 1) = +0)."""
    lo, x, hi = args
    t = in_type(instr, 1)
    if t.is_float:
        return b.op(arith.MinimumfOp, b.op(arith.MaximumfOp, x, lo), hi)
    if t.is_unsigned or t.is_pred:
        return b.op(arith.MinUIOp, b.op(arith.MaxUIOp, x, lo), hi)
    return b.op(arith.MinSIOp, b.op(arith.MaxSIOp, x, lo), hi)


@register("select")
@register_complex("select")
def _select(b, instr, args):
    return b.select(*args)


# -- compare -----------------------------------------------------------------------------------------

_FLOAT_PREDICATES = {"EQ": "oeq", "NE": "une", "LT": "olt", "LE": "ole", "GT": "ogt", "GE": "oge"}
_SIGNED_PREDICATES = {"EQ": "eq", "NE": "ne", "LT": "slt", "LE": "sle", "GT": "sgt", "GE": "sge"}
_UNSIGNED_PREDICATES = {"EQ": "eq", "NE": "ne", "LT": "ult", "LE": "ule", "GT": "ugt", "GE": "uge"}


@register("compare")
def _compare(b, instr, args):
    x, y = args
    t = in_type(instr)
    direction = str(instr.attrs.get("direction", "EQ"))
    if t.is_float:
        if str(instr.attrs.get("type", "")) == "TOTALORDER":
            return b.cmpi(_SIGNED_PREDICATES[direction], _total_order_key(b, x), _total_order_key(b, y))
        return b.cmpf(_FLOAT_PREDICATES[direction], x, y)
    table = _UNSIGNED_PREDICATES if (t.is_unsigned or t.is_pred) else _SIGNED_PREDICATES
    return b.cmpi(table[direction], x, y)


def _total_order_key(b: KernelBuilder, x: SSAValue) -> SSAValue:
    """An integer that orders floats totally (-NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN):
    the bits, with the magnitude bits flipped for negative values."""
    width = float_width(x.type)
    ity = IntegerType(width)
    bits = b.op(arith.BitcastOp, x, ity)
    if isinstance(x.type, Float8E8M0FNUType):  # no sign bit: the bits, as an unsigned number
        return b.op(arith.ExtUIOp, bits, IntegerType(width + 1))
    sign_fill = b.op(arith.ShRSIOp, bits, b.constant(width - 1, ity))
    magnitude_mask = b.op(arith.ShRUIOp, sign_fill, b.constant(1, ity))
    return b.op(arith.XOrIOp, bits, magnitude_mask)


def float_width(t: Attribute) -> int:
    return t.bitwidth if hasattr(t, "bitwidth") else t.get_bitwidth


# -- conversions -------------------------------------------------------------------------------------

@register("convert")
@register_complex("convert")
def _convert(b, instr, args):
    (x,) = args
    return convert(b, x, in_type(instr), out_type(instr))


def convert(b: KernelBuilder, x: SSAValue, src: PrimitiveType, dst: PrimitiveType) -> SSAValue:
    """XLA's convert between element types (module docstring). Types narrower than f32 are reached
    through f32 (exact) and left through f32: f64 → bf16 and s32 → bf16 round twice, as XLA's
    convert emitter (and so the evaluator) does; f64 → f8/f4 rounds once, as XLA's does
    (`rounds_once_through_f32`). Complex numbers convert part by part
    (convert_complex)."""
    if src.is_complex or dst.is_complex:
        return convert_complex(b, x, src, dst)
    if src == dst:
        return x
    to = element_type(dst)
    if src.is_float and src.bits < 32:
        x, src = b.op(arith.ExtFOp, x, f32), F32  # exact for every narrow type
        if dst == F32:
            return x
    if dst.is_pred:
        if src.is_float:
            return b.cmpf("une", x, b.constant(0.0, x.type))
        return b.cmpi("ne", x, b.constant(0, x.type))
    if src.is_float and dst.is_float:
        if dst.bits < 32:
            if src == F32:
                narrow = x
            elif rounds_once_through_f32(dst):
                narrow = _f32_rounded_to_odd(b, x)
            else:
                narrow = b.op(arith.TruncFOp, x, f32)
            return b.op(arith.TruncFOp, narrow, to)
        return b.add((arith.ExtFOp if src.bits < dst.bits else arith.TruncFOp)(x, to))
    if src.is_float:
        return _float_to_int(b, x, dst, to)
    if dst.is_float:
        op = arith.UIToFPOp if (src.is_unsigned or src.is_pred) else arith.SIToFPOp
        if dst.bits < 32:
            return b.add(arith.TruncFOp(b.add(op(x, f32)), to))
        return b.add(op(x, to))
    # integer (or pred, an i1) -> integer
    src_bits = 1 if src.is_pred else src.bits
    if dst.bits < src_bits:
        return b.op(arith.TruncIOp, x, to)
    if dst.bits == src_bits:
        return x
    op = arith.ExtUIOp if (src.is_unsigned or src.is_pred) else arith.ExtSIOp
    return b.add(op(x, to))


def _f32_rounded_to_odd(b: KernelBuilder, x: SSAValue) -> SSAValue:
    """An f64 value as f32 rounded to odd: truncated toward zero, its last bit set where inexact."""
    narrow = b.op(arith.TruncFOp, x, f32)
    back = b.op(arith.ExtFOp, narrow, x.type)
    inexact = b.cmpf("one", back, x)
    negative = b.cmpf("olt", x, b.constant(0.0, x.type))
    away = b.select(negative, b.cmpf("olt", back, x), b.cmpf("ogt", back, x))  # rounded away from zero
    i32 = IntegerType(32)
    bits = b.op(arith.BitcastOp, narrow, i32)
    bits = b.op(arith.SubiOp, bits, b.op(arith.ExtUIOp, away, i32))
    bits = b.op(arith.OrIOp, bits, b.op(arith.ExtUIOp, inexact, i32))
    return b.op(arith.BitcastOp, bits, f32)


def convert_complex(b: KernelBuilder, x: SSAValue, src: PrimitiveType, dst: PrimitiveType) -> SSAValue:
    """convert with a complex source or result (module docstring)."""
    if src.is_complex and dst.is_pred:
        zero = b.constant(0.0, x.type.element_type)
        return b.add(arith.OrIOp(*(b.cmpf("une", p, zero) for p in parts(b, x))))
    if src.is_complex:
        re, im = parts(b, x)
        if not dst.is_complex:
            return convert(b, re, complex_component_type(src), dst)
        part = complex_component_type(dst)
        return create(b, *(convert(b, p, complex_component_type(src), part) for p in (re, im)))
    part = complex_component_type(dst)
    return create(b, convert(b, x, src, part), b.constant(0.0, element_type(part)))


def _float_to_int(b: KernelBuilder, x: SSAValue, dst: PrimitiveType, to: Attribute) -> SSAValue:
    """Saturating, on an f32 or f64 value: values at or beyond the bounds give the bound, NaN gives
    0. The bounds compared with are max + 1 and min, powers of two that f32 and f64 hold exactly."""
    min_int, max_int = _int_bounds(dst)
    lo, hi = float(min_int), float(max_int + 1)  # exact powers of two (or 0)
    converted = b.add((arith.FPToSIOp if dst.is_signed else arith.FPToUIOp)(x, to))
    too_big = b.cmpf("oge", x, b.constant(hi, x.type))
    too_small = b.cmpf("ole", x, b.constant(lo, x.type))
    result = b.select(too_big, b.constant(max_int, to), b.select(too_small, b.constant(min_int, to), converted))
    is_nan = b.cmpf("uno", x, x)
    return b.select(is_nan, b.constant(0, to), result)


@register("bitcast-convert")
def _bitcast_convert(b, instr, args):
    src, dst = in_type(instr), out_type(instr)
    if src.bits != dst.bits:
        raise unsupported(instr, f"between types of different widths ({src.name} -> {dst.name})")
    if element_type(src) == element_type(dst):  # pred -> pred, s32 -> u32 (signless alike)
        return args[0]
    return b.op(arith.BitcastOp, args[0], element_type(dst))


@register("stochastic-convert")
def _stochastic_convert(b, instr, args):
    """XLA's StochasticConvertDecomposer (the evaluator's docstring): |x| rounds up when
    random < trunc(frac(|x|) · 2^width) (unsigned), then the sign is restored; x at or beyond the
    result type's lowest/max (converted to x's type) saturates; NaN gives 0. Narrow floats compute
    in f32, where every step is exact."""
    x, random = args
    src, random_type, dst = in_type(instr), in_type(instr, 1), out_type(instr)
    if not src.is_float:
        raise unsupported(instr, f"on {src.name}")
    if src.bits < 32:
        x = b.op(arith.ExtFOp, x, f32)
    to = element_type(dst)
    magnitude = b.op(math.AbsFOp, x)
    whole = b.op(math.FloorOp, magnitude)
    fixed = b.op(arith.MulfOp, b.op(arith.SubfOp, magnitude, whole), constant_like(b, x, 2.0 ** random_type.bits))
    threshold = _float_to_int(b, fixed, random_type, element_type(random_type))
    truncated = _float_to_int(b, whole, dst, to)
    rounded = b.select(b.cmpi("ult", random, threshold), b.op(arith.AddiOp, truncated, b.constant(1, to)), truncated)
    negated = b.op(arith.SubiOp, b.constant(0, to), rounded)
    result = b.select(b.cmpf("olt", x, constant_like(b, x, 0.0)), negated, rounded)
    lo, hi = _int_bounds(dst)
    lo_in_src, hi_in_src = (float(_round_to(v, src)) for v in (lo, hi))
    result = b.select(b.cmpf("ole", x, constant_like(b, x, lo_in_src)), b.constant(lo, to), result)
    return b.select(b.cmpf("oge", x, constant_like(b, x, hi_in_src)), b.constant(hi, to), result)


def _round_to(value: int, pt: PrimitiveType) -> float:
    """An integer rounded to float type `pt` (through f32 for narrow types, as convert does)."""
    wide = np.float64(value) if pt.bits == 64 else np.float32(value)
    with np.errstate(all="ignore"):
        return float(wide.astype(pt.dtype).astype(np.float64))


@register("real")
def _real(b, instr, args):
    """The real part of a float: itself."""
    return args[0]


@register("imag")
def _imag(b, instr, args):
    """The imaginary part of a float: +0."""
    return b.constant(0.0, args[0].type)


_IEEE_LAYOUTS = {"f16": (5, 10), "bf16": (8, 7), "f32": (8, 23), "f64": (11, 52)}
"""(exponent bits, mantissa bits) of the types reduce-precision works on bit by bit."""


@register("reduce-precision")
def _reduce_precision(b, instr, args):
    """Round to `mantissa_bits` with round-to-nearest-even and clamp the exponent range to
    `exponent_bits` (overflow to ±inf, underflow to ±0: denormals are flushed) on the value's own
    bits (f16, bf16, f32, f64; the f8/f4 types go through f32 and round back); NaN stays the same
    NaN, also when mantissa_bits is 0 (XLA:CPU's result: its rounding would turn it into inf)."""
    (x,) = args
    t = in_type(instr)
    if not t.is_float:
        raise unsupported(instr, f"on {t.name}")
    exponent_bits = int(str(instr.attrs["exponent_bits"]))
    mantissa_bits = int(str(instr.attrs["mantissa_bits"]))
    if t.name not in _IEEE_LAYOUTS:
        wide = _reduce_precision_bits(b, b.op(arith.ExtFOp, x, f32), "f32", exponent_bits, mantissa_bits)
        return b.op(arith.TruncFOp, wide, x.type)
    return _reduce_precision_bits(b, x, t.name, exponent_bits, mantissa_bits)


def _reduce_precision_bits(b: KernelBuilder, x: SSAValue, layout: str, exponent_bits: int,
                           mantissa_bits: int) -> SSAValue:
    src_exponent, src_mantissa = _IEEE_LAYOUTS[layout]
    width = 1 + src_exponent + src_mantissa
    ity = IntegerType(width)
    bits = b.op(arith.BitcastOp, x, ity)
    c = lambda v: b.constant(v, ity)  # noqa: E731
    if mantissa_bits < src_mantissa:
        drop = src_mantissa - mantissa_bits
        last_kept = b.add(arith.AndIOp(b.op(arith.ShRUIOp, bits, c(drop)), c(1)))
        bias = b.add(arith.AddiOp(c((1 << (drop - 1)) - 1), last_kept))
        rounded = b.op(arith.AddiOp, bits, bias)
        bits = b.add(arith.AndIOp(rounded, c(~((1 << drop) - 1))))
    if exponent_bits < src_exponent:
        sign_mask = 1 << (width - 1)
        exponent_bias = (1 << (src_exponent - 1)) - 1
        reduced_bias = (1 << (exponent_bits - 1)) - 1
        max_exponent = exponent_bias + reduced_bias
        min_exponent = exponent_bias - reduced_bias
        exponent_mask = ((1 << src_exponent) - 1) << src_mantissa
        magnitude = b.op(arith.AndIOp, bits, c(~sign_mask))
        overflow = b.cmpi("ugt", magnitude, c((max_exponent << src_mantissa) | ((1 << src_mantissa) - 1)))
        underflow = b.cmpi("ule", magnitude, c((min_exponent << src_mantissa) | ((1 << src_mantissa) - 1)))
        sign = b.op(arith.AndIOp, bits, c(sign_mask))
        inf = b.op(arith.OrIOp, sign, c(exponent_mask))
        bits = b.select(overflow, inf, b.select(underflow, sign, bits))
    result = b.op(arith.BitcastOp, bits, x.type)
    return b.select(b.cmpf("uno", x, x), x, result)


# -- helpers for functions computed in f32 ------------------------------------------------------------

def unary_in_f32(fn: Callable[[KernelBuilder, SSAValue], SSAValue]) -> ScalarEmitter:
    """An emitter computing fn(b, x) on an f32 or f64 value; a type narrower than f32 computes the
    whole function in f32 and rounds once (XLA's float normalization upcasts the HLO op), rather
    than after every step as `lower-narrow-floats` would."""
    def emit(b, instr, args):
        (x,) = args
        if not in_type(instr).is_float:
            raise unsupported(instr, f"on {in_type(instr).name}")
        if float_width(x.type) >= 32:
            return fn(b, x)
        return b.add(arith.TruncFOp(fn(b, b.op(arith.ExtFOp, x, f32)), x.type))
    return emit


def constant_like(b: KernelBuilder, x: SSAValue, v: float) -> SSAValue:
    return b.constant(v, x.type)


