"""Exponentials, logarithms and pow as `FloatBuilder` functions (f32 and f64).

Techniques: Cody-Waite range reduction by ln2 and a polynomial (f32, Cephes `expf`, also in Eigen's
`pexp_float`) or Pade form (f64, Cephes `exp`); logarithms by splitting x = m * 2^e with m in
[sqrt(1/2), sqrt(2)) and a polynomial in m - 1 (f32 Cephes `logf`, f64 fdlibm `e_log.c`); expm1
and log1p by Kahan's correction (Eigen's `generic_expm1` / `generic_log1p`). pow is
2^(y * log2|x|): for f32 evaluated in f64; for f64 with log2 carried as a double-double (the atanh
series with its second term in double-double: ~2^-64 relative) so that y * log2|x| stays within half
an ulp of the result's exponent; beyond the exponent range the result is 0 or inf. Specials follow C99 Annex F.
"""

from __future__ import annotations

import math
import struct

from hlocc.codegen.math.float_builder import F32, F64, FloatBuilder, Val

INF = math.inf
LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453

# -- exp -----------------------------------------------------------------------------------------

# (clamp lo, clamp hi, ln2 high part with few bits so n*hi is exact, ln2 low part)
_EXP_REDUCTION = {
    F32: (-104.0, 89.0, 0.693359375, -2.12194440e-4),
    F64: (-746.0, 710.0, 6.93145751953125e-1, 1.42860682030941723212e-6),
}
_EXPF_POLY = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1,
              5.0000001201e-1)
_EXP_PADE_P = (1.26177193074810590878e-4, 3.02994407707441961300e-2, 9.99999999999999999910e-1)
_EXP_PADE_Q = (3.00198505138664455042e-6, 2.52448340349684104192e-3, 2.27265548208155028766e-1,
               2.00000000000000000009e0)


def expm1_reduced(b: FloatBuilder, r: Val) -> Val:
    """e^r - 1 for |r| <= ln2/2 (plus a little), without forming 1 + ..."""
    if r.ty == F32:
        return b.horner(r, _EXPF_POLY) * (r * r) + r
    rr = r * r
    p = r * b.horner(rr, _EXP_PADE_P)
    return 2.0 * (p / (b.horner(rr, _EXP_PADE_Q) - p))


def exp_reduced(b: FloatBuilder, r: Val) -> Val:
    """e^r for |r| <= ln2/2 (plus a little)."""
    return expm1_reduced(b, r) + 1.0


def exp(b: FloatBuilder, x: Val) -> Val:
    """e^x. The clamp keeps 2^n in range; overflow to inf and gradual underflow come out of the
    final scaling (rounded once); NaN propagates."""
    lo, hi, c1, c2 = _EXP_REDUCTION[x.ty]
    x = b.clamp(x, lo, hi)
    n = b.roundeven(x * LOG2E)
    r = (x - n * c1) - n * c2
    return b.ldexp(exp_reduced(b, r), n)


def exp_fma(b: FloatBuilder, x: Val) -> Val:
    """e^x on targets with fused multiply-add (expand-float-ops-fma): `exp` with the second step of
    the range reduction and the polynomial's multiply-adds each one `math.fma` (llvm.fma: one
    instruction), so r = (x - n*c1) - n*c2 rounds once instead of twice and Horner's steps lose
    their intermediate roundings; the result stays within 1 ulp (tests/codegen/math). f32 only: f64
    keeps `exp` (its Pade form divides; the numpy emulation of fma, which the accuracy tests run,
    is f32 only). This is a choice made in the expansion, for every kernel that computes exp,
    instead of letting LLVM contract all multiply-adds, which also changes how sums round."""
    if x.ty != F32:
        return exp(b, x)
    lo, hi, _, _ = _EXP_REDUCTION[x.ty]
    t = _exp_fma_round(b, x)
    # u = n + 125 where n = round(x log2 e); for n in [-125, 127], p * 2^n (p = e^r in [0.70, 1.42],
    # exponent field 126 or 127) is a normal float: both forms give it exactly, bit for bit. Any
    # other n (x outside ~[-87, 88.4], NaN, inf: t's bits are then far off) takes the slow form,
    # which clamps x and scales in two steps into the subnormals, 0 and inf. The fast form adds n
    # to p's exponent field: 2 integer ops instead of ~10, and no clamp.
    u = b.bits(t) - (_MAGIC_F32_BITS - 125)
    return b.fast_unless((u | (252 - u)).lt(0), lambda: _exp_fma_scaled(b, x, t),
                         lambda: _exp_fma_scaled(b, x, t, clamp=(lo, hi)))


_MAGIC_F32_BITS = struct.unpack("<i", struct.pack("<f", 1.5 * 2.0**23))[0]
"""The bits of `FloatBuilder.magic(F32)`: t's bits are these plus round(x log2 e)."""


def _exp_fma_round(b: FloatBuilder, x: Val) -> Val:
    """x log2 e + 1.5 * 2^23 rounded once (ties to even): round(x log2 e) in its low mantissa bits."""
    return b.fma(x, x.like(LOG2E), x.like(b.magic(x.ty)))


def _exp_fma_scaled(b: FloatBuilder, x: Val, t: Val, clamp: tuple[float, float] | None = None) -> Val:
    """e^x = p * 2^n, n = t - magic (`_exp_fma_round`), r = x - n ln2 in two steps, p = e^r, scaled
    by adding n to p's exponent field (right only where the result is a normal float); `clamp`: x
    clamped first (t recomputed) and the scale applied in two halves (`ldexp`), right for any x."""
    if clamp is not None:
        x = b.clamp(x, *clamp)
        t = _exp_fma_round(b, x)
    _, _, c1, c2 = _EXP_REDUCTION[x.ty]
    n = t - b.magic(x.ty)
    r = b.fma(n, n.like(-c2), x - n * c1)  # n * c1 is exact (c1 has few bits), so is x - n * c1
    p = _expm1_reduced_fma(b, r) + 1.0
    if clamp is not None:
        return b.ldexp(p, n)
    # t's bits are magic's plus n (two's complement); shifted by 23 only n << 23 stays in 32 bits
    return b.from_bits(b.bits(p) + (b.bits(t) << x.ty.mantissa_bits), x.ty)


def _expm1_reduced_fma(b: FloatBuilder, r: Val) -> Val:
    """`expm1_reduced` for f32 with fused multiply-adds: p(r) * r^2 + r."""
    return b.fma(b.horner_fma(r, _EXPF_POLY), r * r, r)


def exp2_fma(b: FloatBuilder, x: Val) -> Val:
    """`exp2` with `exp_fma`'s polynomial (f32; f64 keeps exp2)."""
    if x.ty != F32:
        return exp2(b, x)
    x = b.clamp(x, -152.0, 129.0)
    n = b.roundeven(x)
    return b.ldexp(_expm1_reduced_fma(b, (x - n) * LN2) + 1.0, n)


def exp2(b: FloatBuilder, x: Val) -> Val:
    """2^x = 2^n * e^(r ln2), r = x - n exact."""
    lo, hi = (-152.0, 129.0) if x.ty == F32 else (-1080.0, 1025.0)
    x = b.clamp(x, lo, hi)
    n = b.roundeven(x)
    return b.ldexp(exp_reduced(b, (x - n) * LN2), n)


def expm1(b: FloatBuilder, x: Val) -> Val:
    """e^x - 1. f32: 2^n (e^r - 1) + (2^n - 1), where e^r - 1 comes from the polynomial without
    cancellation and 2^n - 1 is exact where it matters, so the sum rounds once. f64 (whose Pade
    e^r - 1 is less accurate than e^r): Kahan's (u - 1) * x / log(u), u = e^x rounded."""
    tiny = b.abs(x).lt(2.0 ** -(x.ty.mantissa_bits + 2))  # e^x - 1 rounds to x; keeps -0
    if x.ty == F64:
        u = exp(b, x)
        um1 = u - 1.0
        res = b.select(u.eq(INF) | um1.eq(-1.0), um1, um1 * (x / log(b, u)))
        return b.select(tiny | u.eq(1.0), x, res)
    _, hi, c1, c2 = _EXP_REDUCTION[x.ty]
    xc = b.clamp(x, -60.0, hi)  # below -60, e^x - 1 rounds to -1
    n = b.roundeven(xc * LOG2E)
    em1 = expm1_reduced(b, (xc - n * c1) - n * c2)
    p = b.pow2(b.minimum(n, 64.0))
    res = b.select(n.gt(64.0), b.ldexp(em1 + 1.0, n), p * em1 + (p - 1.0))
    return b.select(tiny, x, res)


# -- log -----------------------------------------------------------------------------------------

_LOGF_POLY = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
              -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1)
# fdlibm Lg1..Lg7: log(1+f) = 2s + s*R(s^2), s = f/(2+f)
_LG = (6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01,
       2.222219843214978396e-01, 1.818357216161805012e-01, 1.531383769920937332e-01,
       1.479819860511658591e-01)
_LN2_HI, _LN2_LO = 6.93147180369123816490e-01, 1.90821492927058770002e-10


def _log_specials(b: FloatBuilder, x: Val, res: Val) -> Val:
    """log-family results for x <= 0, inf and NaN: log(+-0) = -inf, log(x<0) = NaN."""
    res = b.select(x.eq(INF), x, res)
    res = b.select(x.eq(0.0), x.like(-INF), res)
    return b.select(x.lt(0.0) | x.isnan(), x.like(math.nan), res)


def _fdlibm_r(b: FloatBuilder, s: Val) -> Val:
    """s*R(s^2) of fdlibm's log kernel, so log(1+f) = 2s + s*R."""
    z = s * s
    w = z * z
    t1 = w * (_LG[1] + w * (_LG[3] + w * _LG[5]))
    t2 = z * (_LG[0] + w * (_LG[2] + w * (_LG[4] + w * _LG[6])))
    return t1 + t2


def _log1p_small(b: FloatBuilder, f: Val) -> tuple[Val, Val]:
    """For f = m - 1 in [sqrt(1/2) - 1, sqrt(2) - 1): log(1 + f) = f + y, y returned unrounded-into-f
    (the caller adds the large part f last). f32: Cephes logf polynomial; f64: fdlibm kernel."""
    z = f * f
    if f.ty == F32:
        return f, f * z * b.horner(f, _LOGF_POLY) - 0.5 * z
    s = f / (f + 2.0)
    hfsq = 0.5 * z
    return f, s * (hfsq + _fdlibm_r(b, s)) - hfsq


def log(b: FloatBuilder, x: Val) -> Val:
    m, e = b.frexp(x)
    f = m - 1.0
    if x.ty == F32:
        f, y = _log1p_small(b, f)
        res = ((y + e * -2.12194440e-4) + f) + e * 0.693359375
    else:  # fdlibm's evaluation order
        s = f / (f + 2.0)
        hfsq = 0.5 * (f * f)
        res = e * _LN2_HI - ((hfsq - (s * (hfsq + _fdlibm_r(b, s)) + e * _LN2_LO)) - f)
    return _log_specials(b, x, res)


# log2 / log10: y + f multiplied by the constant in two pieces (a short high part that multiplies
# exactly, plus the rest), and the exponent term added last.
_LOG_BASE = {  # name: (1/ln(base) high, low, log_base(2) high, low)
    "log2": (1.44269504072144627571e+00, 1.67517131648865118353e-10, 1.0, 0.0),
    "log10": (4.34294481878168880939e-01, 2.50829467116452752298e-11,
              3.01029995663611771306e-01, 3.69423907715893078616e-13),
}


def _log_base(b: FloatBuilder, x: Val, base: str) -> Val:
    inv_hi, inv_lo, l2_hi, l2_lo = _LOG_BASE[base]
    m, e = b.frexp(x)
    f, y = _log1p_small(b, m - 1.0)
    if x.ty == F32:
        # Evaluate in f64: the f32 terms are exact there, and one final rounding remains.
        f, y, e = (b.extf(v, F64) for v in (f, y, e))
    hi = b.from_bits(b.bits(f) & ~((1 << 32) - 1), F64)  # top 20 bits of f: hi * inv_hi is exact
    lo = (f - hi) + y
    small = (lo * inv_hi + (f + y) * inv_lo) + e * l2_lo
    head, err = b.two_sum(e * l2_hi, hi * inv_hi)  # both products exact
    res = head + (err + small)
    if x.ty == F32:
        res = b.truncf(res, F32)
    return _log_specials(b, x, res)


def log2(b: FloatBuilder, x: Val) -> Val:
    return _log_base(b, x, "log2")


def log10(b: FloatBuilder, x: Val) -> Val:
    return _log_base(b, x, "log10")


def log1p(b: FloatBuilder, x: Val) -> Val:
    """log(1 + x) = log(u) + c/u with u = 1 + x rounded and c = x - (u - 1) its exact rounding error."""
    u = x + 1.0
    res = log(b, u) + (x - (u - 1.0)) / u
    res = b.select(u.eq(float("inf")), u, res)
    res = b.select(u.eq(0.0), x.like(-INF), res)
    return b.select(u.eq(1.0), x, res)  # tiny x (and -0) are their own log1p


# -- pow -----------------------------------------------------------------------------------------

_LOG2E_HI, _LOG2E_LO = 1.4426950408889634, 2.0355273740931033e-17


# log(1+f) = 2*atanh(s) = 2s + 2s*z/3 + 2s*z^2*(1/5 + z/7 + ... + z^10/25), z = s^2 <= 0.0295: the
# series' terms past z^12 are below 2^-66 of the sum. fdlibm's Lg polynomial (`_fdlibm_r`) is within
# 2^-58.45 only, which y*log2(x) multiplies by |y| (up to ~1075/|log2 x|): pow's result is 2^t with
# t's absolute error in ulps of the result, so its log needs ~2^-64 relative.
_ATANH_TAIL = tuple(1.0 / (2 * k + 1) for k in range(12, 1, -1))


def _log2_dd(b: FloatBuilder, a: Val) -> tuple[Val, Val]:
    """log2(a) as hi + lo (f64, positive finite normal or subnormal a), relative error ~2^-64."""
    m, e = b.frexp(a)
    f = m - 1.0  # exact
    u = f + 2.0
    u_lo = (2.0 - u) + f  # u + u_lo = 2 + f exactly
    s = f / u
    p, p_lo = b.two_prod(s, u)
    s_lo = (((f - p) - p_lo) - s * u_lo) / u  # s + s_lo = f / (2 + f) to ~2^-106
    s2, s2_lo = s * 2.0, s_lo * 2.0  # exact
    z, z_lo = b.two_prod(s, s)
    z_lo = z_lo + s2 * s_lo
    c, c_lo = b.two_prod(s2, z)  # the series' second term 2s*z/3 as a double-double
    c_lo = c_lo + (s2 * z_lo + s2_lo * z)
    q = c / 3.0
    q3, q3_lo = b.two_prod(q, b.const(F64, 3.0))
    q_lo = (((c - q3) - q3_lo) + c_lo) / 3.0
    tail = s2 * (z * z) * b.horner(z, _ATANH_TAIL)
    h, h_lo = b.two_sum(s2, q)  # log(1+f) = h + h_lo
    h_lo = h_lo + ((s2_lo + q_lo) + tail)
    g, g_lo = b.two_prod(h, b.const(F64, _LOG2E_HI))
    g2, g2_lo = b.two_prod(h_lo, b.const(F64, _LOG2E_HI))
    g_lo = g_lo + (g2 + (g2_lo + h * _LOG2E_LO))
    hi, lo = b.two_sum(e, g)
    lo = lo + g_lo
    hi2 = hi + lo
    return hi2, lo - (hi2 - hi)


def _exp2_dd(b: FloatBuilder, t: Val, t_lo: Val) -> Val:
    """2^(t + t_lo) (f64) with t_lo << ulp(t). Beyond the clamp the result is 0 or inf whatever
    t_lo is, and t_lo (the error of a huge y * log2|x|) is dropped so that it cannot bring r back."""
    clamped = b.clamp(t, -1080.0, 1025.0)
    t_lo = b.select(clamped.eq(t), t_lo, t_lo.like(0.0))
    n = b.roundeven(clamped)
    r = (clamped - n) + t_lo
    return b.ldexp(exp_reduced(b, r * LN2), n)


def _is_int(b: FloatBuilder, y: Val) -> Val:
    return b.floor(y).eq(y)


def _is_odd_int(b: FloatBuilder, y: Val) -> Val:
    half = y * 0.5
    return _is_int(b, y) & b.floor(half).ne(half)


def powf(b: FloatBuilder, x: Val, y: Val) -> Val:
    """x^y with C99 pow semantics (pow(x, +-0) = 1 even for NaN x, pow(1, y) = 1 even for NaN y,
    pow(-1, +-inf) = 1, negative x needs integral y, signed zeros and infinities by y's parity)."""
    ax = b.abs(x)
    fmt = x.ty
    # Core on safe arguments: |x| in (0, inf), y finite and bounded (a larger |y| only decides
    # between 0 and inf, which the clamp in _exp2_dd keeps).
    safe_x = b.select(ax.eq(0.0) | ax.eq(INF) | ax.isnan(), x.like(1.0), ax)
    safe_y = b.clamp(b.select(y.isnan(), y.like(0.0), y), -2.0**64, 2.0**64)
    if fmt == F32:
        X, Y = b.extf(safe_x, F64), b.extf(safe_y, F64)
        hi, lo = _log2_dd(b, X)
        core = b.truncf(_exp2_dd(b, Y * hi, Y * lo), F32)
    else:
        hi, lo = _log2_dd(b, safe_x)
        t, t_lo = b.two_prod(safe_y, hi)
        core = _exp2_dd(b, t, t_lo + safe_y * lo)
    # |x| = 0 or inf: 0 or inf by the sign of y (the sign of x is applied below).
    res = b.select(ax.eq(0.0), b.select(y.lt(0.0), x.like(INF), x.like(0.0)), core)
    res = b.select(ax.eq(INF), b.select(y.lt(0.0), x.like(0.0), x.like(INF)), res)
    # y = +-inf: inf if |x| > 1 and y > 0 or |x| < 1 and y < 0, else 0; |x| = 1 gives 1.
    y_inf = b.isinf(y)
    grows = ax.gt(1.0).eq(y.gt(0.0))
    res = b.select(y_inf, b.select(grows, x.like(INF), x.like(0.0)), res)
    res = b.select(y_inf & ax.eq(1.0), x.like(1.0), res)
    res = b.select(b.signbit(x) & _is_odd_int(b, y), -res, res)
    res = b.select(x.lt(0.0) & b.isfinite(x) & ~_is_int(b, y), x.like(math.nan), res)
    res = b.select(x.isnan() | y.isnan(), x + y, res)
    return b.select(y.eq(0.0) | x.eq(1.0), x.like(1.0), res)
