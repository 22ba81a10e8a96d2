"""Elemental emission: each elementwise HLO op as arith/math ops on scalars (XLA's
elemental_hlo_to_mlir.cc). One registry entry per opcode; the emitter base (emitters/base.py)
handles the index ops (broadcast, transpose, slice, ...) through indexing maps and calls into this
registry for the scalar work.

Numerics follow XLA (and hlocc's evaluator, which is tested against XLA:CPU):
- integer divide by zero gives -1 (all ones for unsigned); INT_MIN / -1 gives INT_MIN; remainder
  by zero gives the dividend; INT_MIN % -1 gives 0 (no undefined behaviour reaches LLVM);
- shifts by ≥ the bit width give 0, or the sign fill for shift-right-arithmetic;
- float → int conversion saturates at the type's bounds and maps NaN to 0; float → pred is
  `x != 0` (NaN is true); int → pred is `x != 0`;
- maximum/minimum propagate NaN (arith.maximumf/minimumf);
- compare: ordered predicates except NE (unordered), TOTALORDER compares the sign-magnitude bits;
- integer power by squaring; a negative exponent gives 0 except for bases 1 and -1;
- bf16/f16/f8 are emitted on their own type here; `lower-narrow-floats` computes them in f32 with
  one rounding per op, as XLA's float normalization does.
Transcendentals become math ops; `expand-float-ops` turns them into polynomial approximations.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.dialects import arith, math
from xdsl.dialects.builtin import IntegerType
from xdsl.ir import Attribute, SSAValue

from hlocc.codegen.builder import KernelBuilder
from hlocc.codegen.dialect_common import RemFOp
from hlocc.codegen.mlir_types import element_type
from hlocc.errors import UnsupportedError
from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.types import PrimitiveType

ScalarEmitter = Callable[[KernelBuilder, HloInstruction, Sequence[SSAValue]], SSAValue]
ELEMENTAL: dict[str, ScalarEmitter] = {}


def register(*opcodes: str):
    def wrap(fn: ScalarEmitter) -> ScalarEmitter:
        for opcode in opcodes:
            ELEMENTAL[opcode] = fn
        return fn
    return wrap


def emit_elementwise(b: KernelBuilder, instr: HloInstruction, args: Sequence[SSAValue]) -> SSAValue:
    fn = ELEMENTAL.get(instr.opcode)
    if fn is None:
        raise UnsupportedError(f"unsupported: {instr.opcode} in a kernel (instruction '{instr.name}')")
    return fn(b, instr, args)


def _in_type(instr: HloInstruction, k: int = 0) -> PrimitiveType:
    return instr.operand(k).shape.element_type


def _out_type(instr: HloInstruction) -> PrimitiveType:
    return instr.shape.element_type


def _unsupported(instr: HloInstruction, why: str = "") -> UnsupportedError:
    return UnsupportedError(f"unsupported: {instr.opcode}{' ' + why if why else ''} in a kernel "
                            f"(instruction '{instr.name}')")


def _check_not_complex(instr: HloInstruction) -> None:
    if any(op.shape.element_type.is_complex for op in instr.operands) or _out_type(instr).is_complex:
        raise _unsupported(instr, "on complex numbers")


def _bits(t: Attribute) -> int:
    return t.width.data if isinstance(t, IntegerType) else 0


def _int_min(bits: int) -> int:
    return -(1 << (bits - 1))


# -- arithmetic -------------------------------------------------------------------------------------

def _binary(float_op, int_op, uint_op=None):
    def emit(b: KernelBuilder, instr: HloInstruction, args: Sequence[SSAValue]) -> SSAValue:
        _check_not_complex(instr)
        t = _in_type(instr)
        if t.is_float:
            return b.add(float_op(*args))
        op = uint_op if (uint_op is not None and (t.is_unsigned or t.is_pred)) else int_op
        return b.add(op(*args))
    return emit


register("add")(_binary(arith.AddfOp, arith.AddiOp))
register("subtract")(_binary(arith.SubfOp, arith.SubiOp))
register("multiply")(_binary(arith.MulfOp, arith.MuliOp))
register("maximum")(_binary(arith.MaximumfOp, arith.MaxSIOp, arith.MaxUIOp))
register("minimum")(_binary(arith.MinimumfOp, arith.MinSIOp, arith.MinUIOp))
register("and")(_binary(None, arith.AndIOp))
register("or")(_binary(None, arith.OrIOp))
register("xor")(_binary(None, arith.XOrIOp))


@register("divide")
def _divide(b, instr, args):
    _check_not_complex(instr)
    x, y = args
    t = _in_type(instr)
    if t.is_float:
        return b.add(arith.DivfOp(x, y))
    ty = x.type
    zero, one, all_ones = b.constant(0, ty), b.constant(1, ty), b.constant(-1, ty)
    y_is_zero = b.cmpi("eq", y, zero)
    if t.is_unsigned or t.is_pred:
        safe = b.select(y_is_zero, one, y)
        return b.select(y_is_zero, all_ones, b.add(arith.DivUIOp(x, safe)))
    overflow = b.and_([b.cmpi("eq", x, b.constant(_int_min(_bits(ty)), ty)), b.cmpi("eq", y, all_ones)])
    bad = b.add(arith.OrIOp(y_is_zero, overflow))
    quotient = b.add(arith.DivSIOp(x, b.select(bad, one, y)))
    return b.select(y_is_zero, all_ones, b.select(overflow, x, quotient))


@register("remainder")
def _remainder(b, instr, args):
    _check_not_complex(instr)
    x, y = args
    t = _in_type(instr)
    if t.is_float:
        return b.add(RemFOp(x, y))
    ty = x.type
    zero, one, all_ones = b.constant(0, ty), b.constant(1, ty), b.constant(-1, ty)
    y_is_zero = b.cmpi("eq", y, zero)
    if t.is_unsigned or t.is_pred:
        return b.select(y_is_zero, x, b.add(arith.RemUIOp(x, b.select(y_is_zero, one, y))))
    overflow = b.and_([b.cmpi("eq", x, b.constant(_int_min(_bits(ty)), ty)), b.cmpi("eq", y, all_ones)])
    bad = b.add(arith.OrIOp(y_is_zero, overflow))
    rem = b.add(arith.RemSIOp(x, b.select(bad, one, y)))
    return b.select(y_is_zero, x, b.select(overflow, zero, rem))


def _shift(kind: str):
    def emit(b, instr, args):
        x, y = args
        ty = x.type
        bits = _bits(ty)
        in_range = b.cmpi("ult", y, b.constant(bits, ty))
        safe = b.select(in_range, y, b.constant(0, ty))
        if kind == "left":
            shifted, fill = b.add(arith.ShLIOp(x, safe)), b.constant(0, ty)
        elif kind == "logical":
            shifted, fill = b.add(arith.ShRUIOp(x, safe)), b.constant(0, ty)
        else:
            shifted = b.add(arith.ShRSIOp(x, safe))
            fill = b.add(arith.ShRSIOp(x, b.constant(bits - 1, ty)))
        return b.select(in_range, shifted, fill)
    return emit


register("shift-left")(_shift("left"))
register("shift-right-logical")(_shift("logical"))
register("shift-right-arithmetic")(_shift("arithmetic"))


@register("negate")
def _negate(b, instr, args):
    _check_not_complex(instr)
    (x,) = args
    if _in_type(instr).is_float:
        return b.add(arith.NegfOp(x))
    return b.add(arith.SubiOp(b.constant(0, x.type), x))


@register("abs")
def _abs(b, instr, args):
    _check_not_complex(instr)
    (x,) = args
    t = _in_type(instr)
    if t.is_float:
        return b.add(math.AbsFOp(x))
    if t.is_unsigned or t.is_pred:
        return x
    return b.add(math.AbsIOp(x))


@register("sign")
def _sign(b, instr, args):
    _check_not_complex(instr)
    (x,) = args
    t, ty = _in_type(instr), x.type
    if t.is_float:
        # ±0 and NaN are their own sign.
        zero = b.constant(0.0, ty)
        positive = b.select(b.cmpf("ogt", x, zero), b.constant(1.0, ty), x)
        return b.select(b.cmpf("olt", x, zero), b.constant(-1.0, ty), positive)
    zero = b.constant(0, ty)
    if t.is_unsigned or t.is_pred:
        return b.select(b.cmpi("ne", x, zero), b.constant(1, ty), zero)
    positive = b.select(b.cmpi("sgt", x, zero), b.constant(1, ty), zero)
    return b.select(b.cmpi("slt", x, zero), b.constant(-1, ty), positive)


@register("not")
def _not(b, instr, args):
    (x,) = args
    return b.add(arith.XOrIOp(x, b.constant(-1, x.type)))


@register("popcnt")
def _popcnt(b, instr, args):
    return b.add(math.CtPopOp(args[0]))


@register("clz")
def _clz(b, instr, args):
    return b.add(math.CountLeadingZerosOp(args[0]))


def _float_unary(op_class):
    def emit(b, instr, args):
        _check_not_complex(instr)
        if not _in_type(instr).is_float:
            raise _unsupported(instr, f"on {_in_type(instr).name}")
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


@register("logistic")
def _logistic(b, instr, args):
    """1 / (1 + exp(-x)): exact limits 0 and 1 at ∓inf, NaN stays NaN."""
    _check_not_complex(instr)
    (x,) = args
    one = b.constant(1.0, x.type)
    e = b.add(math.ExpOp(b.add(arith.NegfOp(x))))
    return b.add(arith.DivfOp(one, b.add(arith.AddfOp(one, e))))


@register("is-finite")
def _is_finite(b, instr, args):
    (x,) = args
    return b.cmpf("one", b.add(math.AbsFOp(x)), b.constant(float("inf"), x.type))


@register("atan2")
def _atan2(b, instr, args):
    _check_not_complex(instr)
    return b.add(math.Atan2Op(*args))


@register("power")
def _power(b, instr, args):
    _check_not_complex(instr)
    x, y = args
    t = _in_type(instr)
    if t.is_float:
        return b.add(math.PowFOp(x, y))
    return _integer_power(b, x, y, signed=t.is_signed)


def _integer_power(b: KernelBuilder, x: SSAValue, y: SSAValue, signed: bool) -> SSAValue:
    """Exponentiation by squaring over every bit of y (straight-line, so it vectorizes). For a
    negative exponent (signed types): 1 for x == 1, ±1 for x == -1 by parity, else 0 (XLA)."""
    ty = x.type
    bits = _bits(ty)
    one, zero = b.constant(1, ty), b.constant(0, ty)
    result, base, exp = one, x, y
    for _ in range(bits):
        odd = b.cmpi("ne", b.add(arith.AndIOp(exp, one)), zero)
        result = b.select(odd, b.add(arith.MuliOp(result, base)), result)
        base = b.add(arith.MuliOp(base, base))
        exp = b.add(arith.ShRUIOp(exp, one))
    if not signed:
        return result
    minus_one = b.constant(-1, ty)
    odd_y = b.cmpi("ne", b.add(arith.AndIOp(y, one)), zero)
    negative = b.select(b.cmpi("eq", x, one), one,
                        b.select(b.cmpi("eq", x, minus_one), b.select(odd_y, minus_one, one), zero))
    return b.select(b.cmpi("slt", y, zero), negative, result)


@register("clamp")
def _clamp(b, instr, args):
    """clamp(lo, x, hi) = min(max(x, lo), hi)."""
    _check_not_complex(instr)
    lo, x, hi = args
    t = _in_type(instr, 1)
    if t.is_float:
        return b.add(arith.MinimumfOp(b.add(arith.MaximumfOp(x, lo)), hi))
    if t.is_unsigned or t.is_pred:
        return b.add(arith.MinUIOp(b.add(arith.MaxUIOp(x, lo)), hi))
    return b.add(arith.MinSIOp(b.add(arith.MaxSIOp(x, lo)), hi))


@register("select")
def _select(b, instr, args):
    return b.select(*args)


# -- compare -----------------------------------------------------------------------------------------

_FLOAT_PREDICATES = {"EQ": "oeq", "NE": "une", "LT": "olt", "LE": "ole", "GT": "ogt", "GE": "oge"}
_SIGNED_PREDICATES = {"EQ": "eq", "NE": "ne", "LT": "slt", "LE": "sle", "GT": "sgt", "GE": "sge"}
_UNSIGNED_PREDICATES = {"EQ": "eq", "NE": "ne", "LT": "ult", "LE": "ule", "GT": "ugt", "GE": "uge"}


@register("compare")
def _compare(b, instr, args):
    _check_not_complex(instr)
    x, y = args
    t = _in_type(instr)
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
    width = _float_width(x.type)
    ity = IntegerType(width)
    bits = b.add(arith.BitcastOp(x, ity))
    sign_fill = b.add(arith.ShRSIOp(bits, b.constant(width - 1, ity)))
    magnitude_mask = b.add(arith.ShRUIOp(sign_fill, b.constant(1, ity)))
    return b.add(arith.XOrIOp(bits, magnitude_mask))


def _float_width(t: Attribute) -> int:
    return t.bitwidth if hasattr(t, "bitwidth") else t.get_bitwidth


# -- conversions -------------------------------------------------------------------------------------

@register("convert")
def _convert(b, instr, args):
    (x,) = args
    src, dst = _in_type(instr), _out_type(instr)
    return convert(b, x, src, dst, instr)


def convert(b: KernelBuilder, x: SSAValue, src: PrimitiveType, dst: PrimitiveType,
            instr: HloInstruction | None = None) -> SSAValue:
    """XLA's convert between element types (module docstring)."""
    if src.is_complex or dst.is_complex:
        raise UnsupportedError(f"unsupported: convert {src.name} -> {dst.name} in a kernel"
                               + (f" (instruction '{instr.name}')" if instr is not None else ""))
    if src == dst:
        return x
    to = element_type(dst)
    if dst.is_pred:
        if src.is_float:
            return b.cmpf("une", x, b.constant(0.0, x.type))
        return b.cmpi("ne", x, b.constant(0, x.type))
    if src.is_float and dst.is_float:
        if src.bits < dst.bits or (src.bits == dst.bits and src.name in ("bf16",)):
            return b.add(arith.ExtFOp(x, to)) if src.bits < dst.bits else _via_f32(b, x, to)
        if src.bits == dst.bits:
            return _via_f32(b, x, to)
        return b.add(arith.TruncFOp(x, to))
    if src.is_float:
        return _float_to_int(b, x, dst, to)
    if dst.is_float:
        op = arith.UIToFPOp if (src.is_unsigned or src.is_pred) else arith.SIToFPOp
        return b.add(op(x, to))
    # integer -> integer
    if dst.bits < src.bits:
        return b.add(arith.TruncIOp(x, to))
    if dst.bits == src.bits:
        return x
    op = arith.ExtUIOp if (src.is_unsigned or src.is_pred) else arith.ExtSIOp
    return b.add(op(x, to))


def _via_f32(b: KernelBuilder, x: SSAValue, to: Attribute) -> SSAValue:
    from xdsl.dialects.builtin import f32

    return b.add(arith.TruncFOp(b.add(arith.ExtFOp(x, f32)), to))


def _float_to_int(b: KernelBuilder, x: SSAValue, dst: PrimitiveType, to: Attribute) -> SSAValue:
    """Saturating: values at or beyond the bounds give the bound, NaN gives 0. The upper bound
    compare uses 2^(bits-1) (or 2^bits) which every float type represents exactly or as inf."""
    bits = dst.bits
    signed = dst.is_signed
    lo = -(2.0 ** (bits - 1)) if signed else 0.0
    hi = 2.0 ** (bits - 1) if signed else 2.0 ** bits
    max_int = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1
    min_int = -(1 << (bits - 1)) if signed else 0
    converted = b.add((arith.FPToSIOp if signed else arith.FPToUIOp)(x, to))
    too_big = b.cmpf("oge", x, b.constant(hi, x.type))
    too_small = b.cmpf("ole", x, b.constant(lo, x.type))
    result = b.select(too_big, b.constant(max_int, to), b.select(too_small, b.constant(min_int, to), converted))
    is_nan = b.cmpf("uno", x, x)
    return b.select(is_nan, b.constant(0, to), result)


@register("bitcast-convert")
def _bitcast_convert(b, instr, args):
    src, dst = _in_type(instr), _out_type(instr)
    if src.bits != dst.bits:
        raise _unsupported(instr, f"between types of different widths ({src.name} -> {dst.name})")
    if src.is_pred or dst.is_pred:
        return args[0]
    return b.add(arith.BitcastOp(args[0], element_type(dst)))


@register("reduce-precision")
def _reduce_precision(b, instr, args):
    """Round to `mantissa_bits` with round-to-nearest-even and clamp the exponent range to
    `exponent_bits` (overflow to ±inf, underflow to ±0), NaN kept NaN (XLA's EmitReducePrecisionIR)."""
    (x,) = args
    t = _in_type(instr)
    if not t.is_float or t.bits not in (32, 64):
        raise _unsupported(instr, f"on {t.name}")
    exponent_bits = int(str(instr.attrs["exponent_bits"]))
    mantissa_bits = int(str(instr.attrs["mantissa_bits"]))
    width = t.bits
    src_mantissa = 23 if width == 32 else 52
    src_exponent = width - 1 - src_mantissa
    ity = IntegerType(width)
    bits = b.add(arith.BitcastOp(x, ity))
    c = lambda v: b.constant(v, ity)  # noqa: E731
    if mantissa_bits < src_mantissa:
        drop = src_mantissa - mantissa_bits
        last_kept = b.add(arith.AndIOp(b.add(arith.ShRUIOp(bits, c(drop))), c(1)))
        bias = b.add(arith.AddiOp(c((1 << (drop - 1)) - 1), last_kept))
        rounded = b.add(arith.AddiOp(bits, bias))
        bits = b.add(arith.AndIOp(rounded, c(~((1 << drop) - 1))))
    if exponent_bits < src_exponent:
        sign_mask = 1 << (width - 1)
        exponent_bias = (1 << (src_exponent - 1)) - 1
        reduced_bias = (1 << (exponent_bits - 1)) - 1
        max_exponent = exponent_bias + reduced_bias
        min_exponent = exponent_bias - reduced_bias
        exponent_mask = ((1 << src_exponent) - 1) << src_mantissa
        magnitude = b.add(arith.AndIOp(bits, c(~sign_mask)))
        overflow = b.cmpi("ugt", magnitude, c((max_exponent << src_mantissa) | ((1 << src_mantissa) - 1)))
        underflow = b.cmpi("ule", magnitude, c((min_exponent << src_mantissa) | ((1 << src_mantissa) - 1)))
        sign = b.add(arith.AndIOp(bits, c(sign_mask)))
        inf = b.add(arith.OrIOp(sign, c(exponent_mask)))
        bits = b.select(overflow, inf, b.select(underflow, sign, bits))
    result = b.add(arith.BitcastOp(bits, x.type))
    is_nan = b.cmpf("uno", x, x)
    return b.select(is_nan, x, result)


# -- inverse trigonometric and hyperbolic functions, as compositions -----------------------------------
# XLA expands these (chlo decompositions) into the functions expand-float-ops approximates; the
# forms below keep full precision near 0 and avoid overflow for large |x|.

def _f(b: KernelBuilder, x: SSAValue, v: float) -> SSAValue:
    return b.constant(v, x.type)


@register("sinh")
def _sinh(b, instr, args):
    """(expm1(x) - expm1(-x)) / 2: exact near 0, ±inf beyond overflow."""
    (x,) = args
    e1 = b.add(math.ExpM1Op(x))
    e2 = b.add(math.ExpM1Op(b.add(arith.NegfOp(x))))
    return b.add(arith.MulfOp(b.add(arith.SubfOp(e1, e2)), _f(b, x, 0.5)))


@register("cosh")
def _cosh(b, instr, args):
    """(e^|x| + e^-|x|) / 2 computed as e^(|x| - ln 2) + e^(-|x|) / 2 so it overflows only when cosh does."""
    (x,) = args
    a = b.add(math.AbsFOp(x))
    big = b.add(math.ExpOp(b.add(arith.SubfOp(a, _f(b, x, 0.6931471805599453)))))
    small = b.add(arith.MulfOp(b.add(math.ExpOp(b.add(arith.NegfOp(a)))), _f(b, x, 0.5)))
    return b.add(arith.AddfOp(big, small))


@register("asinh")
def _asinh(b, instr, args):
    """sign(x) · log1p(|x| + x²/(1 + sqrt(1 + x²))), and log(|x|) + ln 2 when x² would overflow."""
    (x,) = args
    a = b.add(math.AbsFOp(x))
    one = _f(b, x, 1.0)
    a2 = b.add(arith.MulfOp(a, a))
    small = b.add(math.Log1pOp(b.add(arith.AddfOp(
        a, b.add(arith.DivfOp(a2, b.add(arith.AddfOp(one, b.add(math.SqrtOp(b.add(arith.AddfOp(one, a2))))))))))))
    large = b.add(arith.AddfOp(b.add(math.LogOp(a)), _f(b, x, 0.6931471805599453)))
    threshold = _f(b, x, 1e18 if _float_width(x.type) == 32 else 1e150)
    r = b.select(b.cmpf("ogt", a, threshold), large, small)
    return b.add(math.CopySignOp(r, x))


@register("acosh")
def _acosh(b, instr, args):
    """log(x + sqrt((x - 1)(x + 1))), log(x) + ln 2 for huge x; NaN below 1."""
    (x,) = args
    one = _f(b, x, 1.0)
    root = b.add(math.SqrtOp(b.add(arith.MulfOp(b.add(arith.SubfOp(x, one)), b.add(arith.AddfOp(x, one))))))
    # log1p((x - 1) + root) keeps precision near 1.
    small = b.add(math.Log1pOp(b.add(arith.AddfOp(b.add(arith.SubfOp(x, one)), root))))
    large = b.add(arith.AddfOp(b.add(math.LogOp(x)), _f(b, x, 0.6931471805599453)))
    threshold = _f(b, x, 1e18 if _float_width(x.type) == 32 else 1e150)
    return b.select(b.cmpf("ogt", x, threshold), large, small)


@register("atanh")
def _atanh(b, instr, args):
    """0.5 · (log1p(x) - log1p(-x)): ±inf at ±1, NaN beyond."""
    (x,) = args
    p = b.add(math.Log1pOp(x))
    m = b.add(math.Log1pOp(b.add(arith.NegfOp(x))))
    return b.add(arith.MulfOp(b.add(arith.SubfOp(p, m)), _f(b, x, 0.5)))


@register("asin")
def _asin(b, instr, args):
    """atan2(x, sqrt((1 - x)(1 + x)))."""
    (x,) = args
    one = _f(b, x, 1.0)
    root = b.add(math.SqrtOp(b.add(arith.MulfOp(b.add(arith.SubfOp(one, x)), b.add(arith.AddfOp(one, x))))))
    return b.add(math.Atan2Op(x, root))


@register("acos")
def _acos(b, instr, args):
    """atan2(sqrt((1 - x)(1 + x)), x)."""
    (x,) = args
    one = _f(b, x, 1.0)
    root = b.add(math.SqrtOp(b.add(arith.MulfOp(b.add(arith.SubfOp(one, x)), b.add(arith.AddfOp(one, x))))))
    return b.add(math.Atan2Op(root, x))
