"""Elemental emission on complex numbers (XLA's elemental_hlo_to_mlir: an HLO op on complex operands
becomes `complex` dialect ops, which `expand-float-ops` expands into arithmetic on the parts, as
approx_complex.py states).

A complex value is one SSA value of type `complex<f32>` (c64) or `complex<f64>` (c128), built with
`complex.create` and taken apart with `complex.re`/`complex.im`; kernel buffers hold `complex<fN>`
elements (the LLVM translator's `{fN, fN}`, numpy's layout). So index ops, selects, reductions and
branches carry complex numbers like any scalar.

Numerics are the evaluator's (evaluator/elementwise.py):
- add, subtract, multiply, divide, negate compute on the operands' type (c64 in f32, as numpy does);
- every function (abs, sign, exponential, log, sqrt, tanh, sine, ..., power, atan2) of c64 numbers
  is computed in c128 and rounded once to c64, as the evaluator computes them (and as narrow floats
  compute in f32); sign, rsqrt, logistic, power and atan2 are the evaluator's compositions: z / |z|
  part by part (z for 0), 1 / sqrt(z), 1 / (1 + e^-z), e^(y log x) with its special cases, and
  -i log((x + iy) / sqrt(x² + y²));
- compare EQ is true where both parts are equal (ordered), NE where either differs (unordered);
- real, imag and complex take numbers apart and build them; convert works on the parts (a real
  value becomes the real part, imaginary part +0; complex → complex rounds each part; complex →
  pred is "either part non-zero", complex → real takes the real part).
What the evaluator does not define on complex numbers (maximum, minimum, clamp, remainder, compare
LT/LE/GT/GE) has no entry and raises UnsupportedError.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects import arith
from xdsl.dialects import complex as cx
from xdsl.dialects.builtin import ComplexType, f32, f64
from xdsl.ir import SSAValue

from hlocc.codegen.elemental.complex_values import constant, create, parts
from hlocc.codegen.elemental.registry import register, register_complex
from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.ir.mlir_types import element_type
from hlocc.errors import UnsupportedError


def _cast_parts(b: KernelBuilder, z: SSAValue, part) -> SSAValue:
    """z with its parts extended or truncated to float type `part`."""
    if z.type.element_type == part:
        return z
    cast = arith.ExtFOp if part == f64 else arith.TruncFOp
    return create(b, *(b.add(cast(p, part)) for p in parts(b, z)))


# -- arithmetic on the operands' type -----------------------------------------------------------------


def _op(op_class) -> Callable:
    return lambda b, instr, args: b.add(op_class(*args))


for _opcode, _op_class in {"add": cx.AddOp, "subtract": cx.SubOp, "multiply": cx.MulOp, "divide": cx.DivOp,
                           "negate": cx.NegOp}.items():
    register_complex(_opcode)(_op(_op_class))


@register_complex("compare")
def _compare(b, instr, args):
    direction = str(instr.attrs.get("direction", "EQ"))
    if direction not in ("EQ", "NE"):
        raise UnsupportedError(f"unsupported: compare with direction {direction} on complex numbers in a kernel "
                               f"(instruction '{instr.name}')")
    (xr, xi), (yr, yi) = (parts(b, z) for z in args)
    if direction == "EQ":
        return b.op(arith.AndIOp, b.cmpf("oeq", xr, yr), b.cmpf("oeq", xi, yi))
    return b.op(arith.OrIOp, b.cmpf("une", xr, yr), b.cmpf("une", xi, yi))


@register_complex("real")
def _real(b, instr, args):
    return parts(b, args[0])[0]


@register_complex("imag")
def _imag(b, instr, args):
    return parts(b, args[0])[1]


@register("complex")
@register_complex("complex")
def _complex(b, instr, args):
    """re + i·im, the parts stored as given (complex(inf, 0) is inf + 0i)."""
    return create(b, *args)


# -- functions: c64 computes in c128 --------------------------------------------------------------------

ComplexFunction = Callable[..., SSAValue]


def in_c128(fn: ComplexFunction) -> Callable:
    """An emitter computing fn(b, *c128 operands); c64 operands are widened exactly and the result
    (complex or real) rounded once to the instruction's type."""
    def emit(b, instr, args):
        result = fn(b, *(_cast_parts(b, z, f64) for z in args))
        out = element_type(instr.shape.element_type)
        if isinstance(out, ComplexType):
            return _cast_parts(b, result, out.element_type)
        return result if out == f64 else b.op(arith.TruncFOp, result, f32)
    return emit


for _opcode, _op_class in {
    "abs": cx.AbsOp, "exponential": cx.ExpOp, "exponential-minus-one": cx.Expm1Op, "log": cx.LogOp,
    "log-plus-one": cx.Log1pOp, "sqrt": cx.SqrtOp, "tanh": cx.TanhOp, "sine": cx.SinOp, "cosine": cx.CosOp,
    "tan": cx.TanOp,
}.items():
    register_complex(_opcode)(in_c128(lambda b, z, op_class=_op_class: b.add(op_class(z))))


def _one(b: KernelBuilder, like: SSAValue) -> SSAValue:
    return constant(b, 1.0, 0.0, like)


@register_complex("rsqrt")
@in_c128
def _rsqrt(b, z):
    """1 / sqrt(z)."""
    return b.add(cx.DivOp(_one(b, z), b.add(cx.SqrtOp(z))))


@register_complex("logistic")
@in_c128
def _logistic(b, z):
    """1 / (1 + e^-z)."""
    one = _one(b, z)
    return b.add(cx.DivOp(one, b.add(cx.AddOp(one, b.add(cx.ExpOp(b.add(cx.NegOp(z))))))))


@register_complex("sign")
@in_c128
def _sign(b, z):
    """z / |z| as XLA:CPU computes it: each part divided by |z| (sign(1e30) = 1 exactly,
    sign(inf + 0i) = NaN + 0i), and z itself for |z| = 0 (sign(-0 + 0i) = -0 + 0i)."""
    modulus = b.add(cx.AbsOp(z))
    re, im = parts(b, z)
    quotient = create(b, b.add(arith.DivfOp(re, modulus)), b.add(arith.DivfOp(im, modulus)))
    return b.select(b.cmpf("oeq", modulus, b.constant(0.0, modulus.type)), z, quotient)


@register_complex("power")
@in_c128
def _power(b, x, y):
    """e^(y log x), with the evaluator's rules (evaluator/complex_math.py `complex_power`): x^0 =
    1^y = 1; 0^y = 0 for a real y > 0, NaN + NaN i for any other y (XLA:CPU's); (+inf + 0i)^y =
    +inf for real y > 0 and 0 for real y < 0."""
    result = b.add(cx.ExpOp(b.add(cx.MulOp(y, b.add(cx.LogOp(x))))))
    (xr, xi), (yr, yi) = parts(b, x), parts(b, y)
    zero, one = constant(b, 0.0, 0.0, x), _one(b, x)
    nan = constant(b, float("nan"), float("nan"), x)
    c = lambda v: b.constant(v, xr.type)  # noqa: E731
    x_is_zero = b.add(arith.AndIOp(b.cmpf("oeq", xr, c(0.0)), b.cmpf("oeq", xi, c(0.0))))
    y_positive, y_negative = b.cmpf("ogt", yr, c(0.0)), b.cmpf("olt", yr, c(0.0))
    y_real_positive = b.op(arith.AndIOp, y_positive, b.cmpf("oeq", yi, c(0.0)))
    result = b.select(x_is_zero, b.select(y_real_positive, zero, nan), result)
    inf_real = b.and_([b.cmpf("oeq", xi, c(0.0)), b.cmpf("oeq", xr, c(float("inf"))), b.cmpf("oeq", yi, c(0.0))])
    result = b.select(b.op(arith.AndIOp, inf_real, y_positive), x, result)
    result = b.select(b.op(arith.AndIOp, inf_real, y_negative), zero, result)
    x_is_one = b.add(arith.AndIOp(b.cmpf("oeq", xr, c(1.0)), b.cmpf("oeq", xi, c(0.0))))
    y_is_zero = b.add(arith.AndIOp(b.cmpf("oeq", yr, c(0.0)), b.cmpf("oeq", yi, c(0.0))))
    return b.select(b.op(arith.OrIOp, x_is_one, y_is_zero), one, result)


@register_complex("atan2")
@in_c128
def _atan2(b, y, x):
    """atan2(y, x) = -i log((x + iy) / sqrt(x² + y²)) (HloEvaluator's formula, each product a
    complex multiplication)."""
    i = constant(b, 0.0, 1.0, x)
    minus_i = constant(b, -0.0, -1.0, x)
    mul = lambda u, v: b.add(cx.MulOp(u, v))  # noqa: E731
    numerator = b.add(cx.AddOp(x, mul(i, y)))
    denominator = b.add(cx.SqrtOp(b.add(cx.AddOp(mul(x, x), mul(y, y)))))
    return mul(minus_i, b.add(cx.LogOp(b.add(cx.DivOp(numerator, denominator)))))
