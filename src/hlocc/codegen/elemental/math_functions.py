"""Elementwise functions composed of others: logistic and the hyperbolic and inverse trigonometric
functions, as XLA expands them (chlo decompositions) into the functions `expand-float-ops`
approximates, in forms that keep full precision near 0 and do not overflow before the result does.
Types narrower than f32 compute each function in f32 and round once (`unary_in_f32`).

Registered into the `elemental` registry (imported by it).
"""

from __future__ import annotations

from xdsl.dialects import arith, math
from xdsl.ir import SSAValue

from hlocc.codegen.elemental.ops import constant_like, float_width, unary_in_f32
from hlocc.codegen.elemental.registry import register
from hlocc.codegen.ir.builder import KernelBuilder

LN2 = 0.6931471805599453


def _by_width(x: SSAValue, v32: float, v64: float) -> float:
    return v32 if float_width(x.type) == 32 else v64


def _half_square_of_exp_half(b: KernelBuilder, a: SSAValue) -> SSAValue:
    """e^a / 2 as (e^(a/2) / 2) · e^(a/2): finite as long as the result is (e^a alone overflows
    first), within about 3 ulp."""
    h = b.add(math.ExpOp(b.op(arith.MulfOp, a, constant_like(b, a, 0.5))))
    return b.add(arith.MulfOp(b.op(arith.MulfOp, h, constant_like(b, a, 0.5)), h))


@register("logistic")
@unary_in_f32
def _logistic(b, x):
    """e / (1 + e) for x < 0 and 1 / (1 + e) otherwise, with e = exp(-|x|): never overflows, keeps
    tiny results for very negative x (logistic(-100) = e^-100, not 0); ±inf give 1 and 0, NaN NaN."""
    one = constant_like(b, x, 1.0)
    e = b.add(math.ExpOp(b.op(arith.NegfOp, b.op(math.AbsFOp, x))))
    numerator = b.select(b.cmpf("olt", x, constant_like(b, x, 0.0)), e, one)
    return b.op(arith.DivfOp, numerator, b.op(arith.AddfOp, one, e))


@register("sinh")
@unary_in_f32
def _sinh(b, x):
    """(expm1(x) - expm1(-x)) / 2, exact near 0; for |x| beyond 80 (f32) / 700 (f64), where e^-|x|
    no longer matters, ±e^|x| / 2 computed so that it overflows only where sinh does."""
    e1 = b.op(math.ExpM1Op, x)
    e2 = b.op(math.ExpM1Op, b.op(arith.NegfOp, x))
    small = b.op(arith.MulfOp, b.op(arith.SubfOp, e1, e2), constant_like(b, x, 0.5))
    a = b.op(math.AbsFOp, x)
    large = b.op(math.CopySignOp, _half_square_of_exp_half(b, a), x)
    return b.select(b.cmpf("ogt", a, constant_like(b, x, _by_width(x, 80.0, 700.0))), large, small)


@register("cosh")
@unary_in_f32
def _cosh(b, x):
    """(e^|x| + e^-|x|) / 2; beyond 80 (f32) / 700 (f64) e^|x| / 2 computed so that it overflows
    only where cosh does."""
    a = b.op(math.AbsFOp, x)
    e = b.op(math.ExpOp, a)
    half = constant_like(b, x, 0.5)
    small = b.op(arith.AddfOp, b.op(arith.MulfOp, e, half), b.op(arith.DivfOp, half, e))
    large = _half_square_of_exp_half(b, a)
    return b.select(b.cmpf("ogt", a, constant_like(b, x, _by_width(x, 80.0, 700.0))), large, small)


@register("asinh")
@unary_in_f32
def _asinh(b, x):
    """sign(x) · log1p(|x| + x²/(1 + sqrt(1 + x²))), and log(|x|) + ln 2 where x² would overflow."""
    a = b.op(math.AbsFOp, x)
    one = constant_like(b, x, 1.0)
    a2 = b.op(arith.MulfOp, a, a)
    small = b.add(math.Log1pOp(b.add(arith.AddfOp(
        a, b.add(arith.DivfOp(a2, b.add(arith.AddfOp(one, b.op(math.SqrtOp, b.op(arith.AddfOp, one, a2))))))))))
    large = b.op(arith.AddfOp, b.op(math.LogOp, a), constant_like(b, x, LN2))
    r = b.select(b.cmpf("ogt", a, constant_like(b, x, _by_width(x, 1e18, 1e150))), large, small)
    return b.op(math.CopySignOp, r, x)


@register("acosh")
@unary_in_f32
def _acosh(b, x):
    """log1p((x - 1) + sqrt((x - 1)(x + 1))) (precise near 1), log(x) + ln 2 where the product
    would overflow; NaN below 1 (the product is positive again for x < -1)."""
    one = constant_like(b, x, 1.0)
    x_minus_one = b.op(arith.SubfOp, x, one)
    root = b.add(math.SqrtOp(b.op(arith.MulfOp, x_minus_one, b.op(arith.AddfOp, x, one))))
    small = b.op(math.Log1pOp, b.op(arith.AddfOp, x_minus_one, root))
    large = b.op(arith.AddfOp, b.op(math.LogOp, x), constant_like(b, x, LN2))
    r = b.select(b.cmpf("ogt", x, constant_like(b, x, _by_width(x, 1e18, 1e150))), large, small)
    return b.select(b.cmpf("olt", x, one), constant_like(b, x, float("nan")), r)


@register("atanh")
@unary_in_f32
def _atanh(b, x):
    """0.5 · (log1p(x) - log1p(-x)): ±inf at ±1, NaN beyond."""
    p = b.op(math.Log1pOp, x)
    m = b.op(math.Log1pOp, b.op(arith.NegfOp, x))
    return b.op(arith.MulfOp, b.op(arith.SubfOp, p, m), constant_like(b, x, 0.5))


def _sqrt_one_minus_square(b: KernelBuilder, x: SSAValue) -> SSAValue:
    one = constant_like(b, x, 1.0)
    return b.add(math.SqrtOp(b.op(arith.MulfOp, b.op(arith.SubfOp, one, x), b.op(arith.AddfOp, one, x))))


@register("asin")
@unary_in_f32
def _asin(b, x):
    """atan2(x, sqrt((1 - x)(1 + x)))."""
    return b.op(math.Atan2Op, x, _sqrt_one_minus_square(b, x))


@register("acos")
@unary_in_f32
def _acos(b, x):
    """atan2(sqrt((1 - x)(1 + x)), x)."""
    return b.op(math.Atan2Op, _sqrt_one_minus_square(b, x), x)
