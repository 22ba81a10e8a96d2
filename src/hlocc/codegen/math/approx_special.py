"""tanh, erf, cbrt and rsqrt as `FloatBuilder` functions (f32 and f64).

tanh: XLA's clamped rational approximations (xla/codegen/intrinsic/tanh.cc, from Eigen): f32 a
13/6 odd/even rational on x clamped to +-7.90531110763549805 (the clamp, for evaluation without
FMA contraction, where the approximation reaches exactly 1), x itself below 0.0004; f64 a 19/18
rational clamped at +-17.714196154005176. Both give +-1 for |x| >= 20. `tanh_fma` is the f32 form
XLA:CPU emits on FMA hosts (EmitFastTanh with_fma): polynomials as fused multiply-adds, clamp
+-7.99881172180175781. The two differ by a few ulps near +-1, which 1 + tanh(x) (GELU) magnifies:
matching XLA:CPU there takes the same variant. `tanh_bf16` / `tanh_bf16_fma`: the same two for an
argument that is a widened bf16 value and a result rounded straight to bf16 (lower-narrow-floats'
promotion of a bf16 tanh): no clamp and no |x| < 0.0004 select, +-1 at or above the clamp; equal
to `tanh` / `tanh_fma` after that rounding for all 65,536 bf16 inputs (tests/codegen/transforms/test_narrow_floats.py).
erf: f32 XLA's rational approximation (expand_float_ops.cc) on x clamped to erfinv(1 - 2^-23),
+-1 beyond; f64 Cephes `ndtr.c`: x*T(x^2)/U(x^2) for |x| <= 1, 1 - exp(-x^2)*P(|x|)/Q(|x|) up
to 6, +-1 beyond.
cbrt: in f64 for both formats: x = m * 2^(3q + rem), a quadratic first guess of cbrt(m * 2^rem),
one Halley step, fdlibm's final Newton step on a 22-bit-rounded guess (< 0.667 ulp in f64).
rsqrt: 1 / sqrt(x), two correctly rounded ops, as XLA's portable path does.
"""

from __future__ import annotations

from hlocc.codegen.math.approx_exp_log import exp
from hlocc.codegen.math.float_builder import F32, F64, FloatBuilder, Val

# -- tanh ----------------------------------------------------------------------------------------

_TANHF_P = (-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11, 5.12229709037114e-08,
            1.48572235717979e-05, 6.37261928875436e-04, 4.89352455891786e-03)
_TANHF_Q = (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03, 4.89352518554385e-03)
_TANH_P = (2.6158007860482230e-23, 7.6534862268749319e-19, 3.1309488231386680e-15, 4.2303918148209176e-12,
           2.4618379131293676e-09, 6.8644367682497074e-07, 9.3839087674268880e-05, 5.9809711724441161e-03,
           1.5184719640284322e-01, 1.0)
_TANH_Q = (6.463747022670968018e-21, 5.782506856739003571e-17, 1.293019623712687916e-13,
           1.123643448069621992e-10, 4.492975677839633985e-08, 8.785185266237658698e-06,
           8.295161192716231542e-04, 3.437448108450402717e-02, 4.851805297361760360e-01, 1.0)


def tanh(b: FloatBuilder, x: Val, fma: bool = False, bf16: bool = False) -> Val:
    if x.ty == F32:
        clamp, num, den = (7.99881172180175781 if fma else 7.90531110763549805), _TANHF_P, _TANHF_Q
    else:
        clamp, num, den = 17.714196154005176, _TANH_P, _TANH_Q
    horner = b.horner_fma if fma and x.ty == F32 else b.horner
    if bf16 and x.ty == F32:
        # Below the clamp xc is x; at or above it the clamped rational is within 2^-9 of +-1, which
        # rounds to +-1 in bf16; and for every bf16 |x| < 0.0004 it rounds to x (subnormals too).
        x2 = x * x
        res = x * horner(x2, num) / horner(x2, den)
        return b.select(b.abs(x).ge(clamp), b.copysign(1.0, x), res)
    xc = b.clamp(x, -clamp, clamp)
    x2 = xc * xc
    res = xc * horner(x2, num) / horner(x2, den)
    ax = b.abs(x)
    if x.ty == F32:
        res = b.select(ax.lt(0.0004), x, res)
    return b.select(ax.ge(20.0), b.copysign(1.0, x), res)


def tanh_fma(b: FloatBuilder, x: Val) -> Val:
    return tanh(b, x, fma=True)


def tanh_bf16(b: FloatBuilder, x: Val) -> Val:
    """`tanh` of an f32 that is a widened bf16 value, for a result rounded straight to bf16."""
    return tanh(b, x, bf16=True)


def tanh_bf16_fma(b: FloatBuilder, x: Val) -> Val:
    return tanh(b, x, fma=True, bf16=True)


# -- erf -----------------------------------------------------------------------------------------

_ERFF_P = (0.00022905065861350646, 0.0034082910107109506, 0.050955695062380861, 0.18520832239976145,
           1.128379143519084)
_ERFF_Q = (-1.1791602954361697e-7, 0.000023547966471313185, 0.0010179625278914885, 0.014070470171167667,
           0.11098505178285362, 0.49746925110067538, 1.0)
_ERFF_SATURATE = 3.7439211627767994  # erfinv(1 - 2^-23): erf rounds to +-1 beyond
_ERF_T = (9.60497373987051638749e0, 9.00260197203842689217e1, 2.23200534594684319226e3,
          7.00332514112805075473e3, 5.55923013010394962768e4)
_ERF_U = (3.35617141647503099647e1, 5.21357949780152679795e2, 4.59432382970980127987e3,
          2.26290000613890934246e4, 4.92673942608635921086e4)
_ERFC_P = (2.46196981473530512524e-10, 5.64189564831068821977e-1, 7.46321056442269912687e0,
           4.86371970985681366614e1, 1.96520832956077098242e2, 5.26445194995477358631e2,
           9.34528527171957607540e2, 1.02755188689515710272e3, 5.57535335369399327526e2)
_ERFC_Q = (1.32281951154744992508e1, 8.67072140885989742329e1, 3.54937778887819891062e2,
           9.75708501743205489753e2, 1.82390916687909736289e3, 2.24633760818710981792e3,
           1.65666309194161350182e3, 5.57535340817727675546e2)


def erf(b: FloatBuilder, x: Val) -> Val:
    ax = b.abs(x)
    if x.ty == F32:
        xc = b.clamp(x, -_ERFF_SATURATE, _ERFF_SATURATE)
        x2 = xc * xc
        res = xc * b.horner(x2, _ERFF_P) / b.horner(x2, _ERFF_Q)
        return b.select(ax.ge(_ERFF_SATURATE), b.copysign(1.0, x), res)
    z = x * x
    small = x * b.horner(z, _ERF_T) / b.horner_monic(z, _ERF_U)
    a = b.clamp(ax, 1.0, 6.0)
    erfc = exp(b, -(a * a)) * b.horner(a, _ERFC_P) / b.horner_monic(a, _ERFC_Q)
    res = b.select(ax.le(1.0), small, b.copysign(1.0 - erfc, x))
    return b.select(ax.ge(6.0), b.copysign(1.0, x), res)


# -- cbrt ----------------------------------------------------------------------------------------

_CBRT_GUESS = (-0.10629741443414693, 0.551181373384491, 0.5549358432795503)  # on [sqrt(1/2), sqrt(2)]
_CBRT_2 = (1.0, 1.2599210498948732, 1.5874010519681996)  # cbrt(2^rem)


def cbrt(b: FloatBuilder, x: Val) -> Val:
    a = b.abs(x)
    wide = b.extf(a, F64) if x.ty == F32 else a
    m, e = b.frexp(wide)
    q = b.floor((e + 0.5) * (1.0 / 3.0))
    rem = e - 3.0 * q
    scale = b.select(rem.eq(1.0), wide.like(2.0), b.select(rem.eq(2.0), wide.like(4.0), 1.0))
    y = m * scale  # cbrt(wide) = cbrt(y) * 2^q
    t = b.horner(m, _CBRT_GUESS)
    t = t * b.select(rem.eq(1.0), wide.like(_CBRT_2[1]), b.select(rem.eq(2.0), wide.like(_CBRT_2[2]), 1.0))
    t3 = t * t * t
    t = t * (t3 + 2.0 * y) / (2.0 * t3 + y)  # Halley: relative error ~1e-3 -> ~1e-9
    t = b.from_bits((b.bits(t) + 0x80000000) & -0x40000000, F64)  # 22 bits, so t*t is exact
    s = t * t
    r = y / s
    r = (r - t) / ((t + t) + r)
    t = t + t * r
    res = b.ldexp(t, q)
    if x.ty == F32:
        res = b.truncf(res, F32)
    res = b.copysign(res, x)
    return b.select(a.gt(0.0) & b.isfinite(x), res, x)  # +-0, +-inf, NaN are their own cbrt


def rsqrt(b: FloatBuilder, x: Val) -> Val:
    return 1.0 / b.sqrt(x)
