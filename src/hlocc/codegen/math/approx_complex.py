"""Complex arithmetic and functions as `FloatBuilder` functions on (re, im) pairs (f32 and f64
parts), which `expand-float-ops` emits for the `complex` dialect's ops.

The numerics are the reference evaluator's, i.e. numpy's on this host (tests/codegen compares bit
for bit or within ulps):
- add, sub, neg: part by part.
- mul: (ac - bd) + (ad + bc)i; with `fma` (the CPU pipeline on FMA hosts) re = fma(a, c, -bd) and
  im = fma(a, d, bc): numpy's SIMD loop on AVX2/AVX-512 hosts, and what LLVM contracts XLA:CPU's
  EmitComplexMultiply to there. No C99 Annex G recovery of infinities (neither does numpy or XLA).
- div: Smith's algorithm as numpy computes it (the ratio of the smaller to the larger divisor part,
  a reciprocal of the scaled denominator, then products), and where that gives NaN + NaN i, XLA's
  EmitComplexDivide's cases for a zero divisor and for infinite parts (so every pair of zeros,
  infinities, NaNs and finite parts gives XLA's quotient). XLA's finite quotients divide by the
  denominator (with fused multiply-adds on the CPU): an ulp or two from numpy's.
- abs: numpy's: larger * sqrt((smaller / larger)² + 1), fused on FMA hosts (not glibc's hypot,
  which csqrt and log1p use).
- exp, log, sqrt, sinh, cosh, tanh, sin, cos, tan: the C library's algorithms (glibc's cexp, clog,
  csqrt, csinh, ccosh, ctanh, and sin, cos, tan through them), whose special values (C99 Annex G)
  numpy returns, built on `expand-float-ops`' real approximations. Within a few ulps of the parts'
  magnitude for sin/cos arguments below ~1.35e10: they use f64's Cody-Waite reduction alone
  (`approx_trig.sin_cos(..., full_range=False)`; approx_trig's module doc says why).
- expm1, log1p: the evaluator's formulas (re = expm1(a)cos(b) - 2sin²(b/2), im = e^a sin(b); and
  log1p(a(2 + a) + b²)/2 or log|1 + z| for the real part, atan2(b, 1 + a) for the imaginary).

The elemental emitter computes the functions of c64 numbers in c128 and rounds once (as the
evaluator does), so the f32 forms here serve arithmetic (add, sub, mul, div, neg) only, in practice.
"""

from __future__ import annotations

from hlocc.codegen.math import approx_exp_log as E
from hlocc.codegen.math import approx_trig as T
from hlocc.codegen.math.float_builder import F32, F64, FloatBuilder, Val

Complex = tuple[Val, Val]
INF = float("inf")


def _limits(x: Val) -> tuple[float, float, float]:
    """(largest finite, smallest normal, machine epsilon) of x's format."""
    if x.ty == F32:
        return 3.4028234663852886e38, 2.0**-126, 2.0**-23
    return 1.7976931348623157e308, 2.0**-1022, 2.0**-52


def _exp_threshold(x: Val) -> float:
    """(max exponent - 1) * ln 2, truncated: where e^x is near overflow (glibc's `t`)."""
    return 88.0 if x.ty == F32 else 709.0


# -- arithmetic ------------------------------------------------------------------------------------


def add(b: FloatBuilder, x: Complex, y: Complex) -> Complex:
    return x[0] + y[0], x[1] + y[1]


def sub(b: FloatBuilder, x: Complex, y: Complex) -> Complex:
    return x[0] - y[0], x[1] - y[1]


def neg(b: FloatBuilder, x: Complex) -> Complex:
    return -x[0], -x[1]


def mul(b: FloatBuilder, x: Complex, y: Complex, fma: bool = False) -> Complex:
    (a, c), (d, e) = x, y
    if fma:
        return b.fma(a, d, -(c * e)), b.fma(a, e, c * d)
    return a * d - c * e, a * e + c * d


def div(b: FloatBuilder, x: Complex, y: Complex) -> Complex:
    """numpy's Smith division (loops.c.src): by the larger divisor part; where that quotient is
    NaN + NaN i (a zero divisor always is: its ratio is 0 / 0), XLA's EmitComplexDivide's cases as
    the evaluator's `complex_divide` states them: a zero divisor gives copysign(inf, y.re) times
    x's parts (x not NaN + NaN i), an infinite x over a finite y inf * (u·ȳ), a finite x over an
    infinite y 0 * (x·v̄), with u, v the parts' infinities as ±1 and their finite parts 0."""
    (ar, ai), (br, bi) = x, y
    abs_r, abs_i = b.abs(br), b.abs(bi)
    rat = bi / br
    scl = 1.0 / (br + bi * rat)
    by_re = ((ar + ai * rat) * scl, (ai - ar * rat) * scl)
    rat = br / bi
    scl = 1.0 / (bi + br * rat)
    by_im = ((ar * rat + ai) * scl, (ai * rat - ar) * scl)
    larger_re = abs_r.ge(abs_i)  # false for NaN: numpy's else branch
    quotient = tuple(b.select(larger_re, r, i) for r, i in zip(by_re, by_im))
    return _xla_division_cases(b, x, y, quotient)


def _xla_division_cases(b: FloatBuilder, x: Complex, y: Complex, quotient: Complex) -> Complex:
    (ar, ai), (br, bi) = x, y
    inf_r, inf_i, inf_br, inf_bi = (b.isinf(p) for p in (ar, ai, br, bi))
    ur, ui, vr, vi = (b.copysign(b.select(f, p.like(1.0), 0.0), p)
                      for f, p in ((inf_r, ar), (inf_i, ai), (inf_br, br), (inf_bi, bi)))
    by_zero = b.and_(b.abs(br).eq(0.0), b.abs(bi).eq(0.0), ~(ar.isnan() & ai.isnan()))
    infinite_x = b.and_(inf_r | inf_i, b.isfinite(br), b.isfinite(bi))
    infinite_y = b.and_(inf_br | inf_bi, b.isfinite(ar), b.isfinite(ai))
    s = b.copysign(INF, br)
    cases = ((s * ar, (ur * br + ui * bi) * INF, (ar * vr + ai * vi) * 0.0),
             (s * ai, (ui * br - ur * bi) * INF, (ai * vr - ar * vi) * 0.0))
    nan = quotient[0].isnan() & quotient[1].isnan()
    return tuple(b.select(nan, b.select(by_zero, z, b.select(infinite_x, i, b.select(infinite_y, f, q))), q)
                 for q, (z, i, f) in zip(quotient, cases))


# -- abs, exp, log, sqrt -----------------------------------------------------------------------------


def _hypot_kernel(b: FloatBuilder, ax: Val, ay: Val) -> Val:
    """sqrt(ax² + ay²) for ax >= ay >= 0 in range, with glibc's (Borges') correction step: the
    rounding error of the square root's argument is recovered without FMA, so the result is
    correctly rounded but in rare cases."""
    h = b.sqrt(ax * ax + ay * ay)
    delta_y = h - ay
    t1_y = ax * (2.0 * delta_y - ax)
    t2_y = (delta_y - 2.0 * (ax - ay)) * delta_y
    delta_x = h - ax
    t1_x = 2.0 * delta_x * (ax - 2.0 * ay)
    t2_x = (4.0 * delta_x - ay) * ay + delta_x * delta_x
    near_y = h.le(2.0 * ay)
    t = b.select(near_y, t1_y, t1_x) + b.select(near_y, t2_y, t2_x)
    return h - t / (2.0 * h)


def hypot(b: FloatBuilder, x: Val, y: Val) -> Val:
    """sqrt(x² + y²) as glibc's hypot: inf if either part is infinite (NaN otherwise if either is
    NaN); the larger part alone where the smaller is below its last bit; operands scaled by
    2^∓600 (2^∓80 for f32) beyond 2^±511 (2^±63), so no square overflows or underflows."""
    ax0, ay0 = b.abs(x), b.abs(y)
    ax, ay = b.maximum(ax0, ay0), b.minimum(ax0, ay0)
    e, k = (63, 80) if x.ty == F32 else (511, 600)
    eps = 2.0 ** -(x.ty.mantissa_bits + 2)
    large, tiny = ax.gt(2.0**e), ay.lt(2.0**-e)
    scale = b.select(large, x.like(2.0**-k), b.select(tiny, x.like(2.0**k), 1.0))
    h = _hypot_kernel(b, ax * scale, ay * scale) / scale
    h = b.select(ay.le(ax * eps) | (tiny & ~large & ax.ge(ay / eps)), ax + ay, h)
    h = b.select(x.isnan() | y.isnan(), x + y, h)
    return b.select(b.isinf(x) | b.isinf(y), x.like(INF), h)


def abs_(b: FloatBuilder, z: Complex, fma: bool = False) -> Val:
    """|z| as numpy computes it (its SIMD loop): larger * sqrt(r² + 1), r = smaller / larger (r² + 1
    one fused multiply-add on FMA hosts; r = 0 for 0 and for two infinite parts); NaN if a part is
    NaN, else inf if a part is infinite (XLA:CPU: abs(NaN + inf i) = NaN, where C99 says inf)."""
    ax, ay = b.abs(z[0]), b.abs(z[1])
    larger, smaller = b.maximum(ax, ay), b.minimum(ax, ay)
    r = b.select(larger.eq(0.0) | smaller.eq(INF), ax.like(0.0), smaller / larger)
    result = larger * b.sqrt(b.fma(r, r, 1.0) if fma else r * r + 1.0)
    result = b.select(ax.eq(INF) | ay.eq(INF), ax.like(INF), result)
    return b.select(_any_nan(z), ax + ay, result)


def _any_nan(z: Complex) -> Val:
    return z[0].isnan() | z[1].isnan()


def _nan_if_any_nan(b: FloatBuilder, z: Complex, w: Complex) -> Complex:
    """w, or NaN + NaN i where a part of z is NaN: XLA:CPU's complex functions are plain formulas
    without C99 Annex G's infinities (log(NaN + inf i) = NaN + NaN i, not inf + NaN i)."""
    nan = _any_nan(z)
    poison = z[0] + z[1]  # NaN wherever a part is
    return b.select(nan, poison, w[0]), b.select(nan, poison, w[1])


def exp(b: FloatBuilder, z: Complex) -> Complex:
    """e^a (cos b + i sin b). Near overflow (a > t) as (e^(a/2) cos b) e^(a/2), so a part that
    fits does not overflow first (glibc splits e^a the same way). A zero imaginary part stays
    exact (exp(x ± 0i) = e^x ± 0i, for x = ±inf and NaN too); infinite real parts give glibc's
    specials (exp(-inf + iy) = ±0 for any y, exp(+inf + i inf or NaN) = inf + NaN i)."""
    a, c = z
    big = a.gt(_exp_threshold(a))
    ea = E.exp(b, b.select(big, a * 0.5, a))
    sin, cos = T.sin_cos(b, c, full_range=False)
    re, im = ea * cos, ea * sin
    re = b.select(big, re * ea, re)
    im = b.select(big, im * ea, im)
    im = b.select(c.eq(0.0), c, im)
    finite_c = b.isfinite(c)
    minus_inf = a.eq(-INF)
    re = b.select(minus_inf & ~finite_c, a.like(0.0), re)
    im = b.select(minus_inf & ~finite_c, a.like(0.0), im)
    plus_inf = a.eq(INF) & ~finite_c
    re = b.select(plus_inf, a, re)
    im = b.select(plus_inf, c - c, im)
    return re, im


def _x2y2m1(b: FloatBuilder, m: Val, n: Val) -> Val:
    """m² + n² - 1 for m² + n² near 1, without cancellation: the squares as exact double-length
    products (Dekker), summed with the errors kept (glibc's __x2y2m1)."""
    p1, e1 = b.two_prod(m, m)
    p2, e2 = b.two_prod(n, n)
    s, t = b.two_sum(p1, m.like(-1.0))
    s, t2 = b.two_sum(s, p2)
    return s + (((t + t2) + e1) + e2)


def log(b: FloatBuilder, z: Complex) -> Complex:
    """log|z| + i atan2(b, a). |z| near 1 (|z|² in [0.5, 2]): log1p(|z|² - 1) / 2 with |z|² - 1
    computed exactly; elsewhere log(max) + log1p((min/max)²) / 2 (no overflow). log(0) = -inf,
    log of an infinite part is +inf (also with a NaN part)."""
    a, c = z
    aa, ac = b.abs(a), b.abs(c)
    m = b.maximum(aa, ac)
    n = b.minimum(aa, ac)
    q = n / m
    far = E.log(b, m) + E.log1p(b, q * q) * 0.5
    near = E.log1p(b, _x2y2m1(b, m, n)) * 0.5
    r2 = m * m + n * n
    re = b.select(r2.ge(0.5) & r2.le(2.0), near, far)
    re = b.select(n.eq(0.0), E.log(b, m), re)
    re = b.select(b.isinf(aa) | b.isinf(ac), a.like(INF), re)
    return _nan_if_any_nan(b, z, (re, T.atan2(b, c, a)))


def sqrt(b: FloatBuilder, z: Complex) -> Complex:
    """glibc's csqrt: r = sqrt((|z| + |a|) / 2), the other part b / 2r (no cancellation), scaled by
    1/4 near overflow and by 2^(p+1) for tiny inputs; the branch cut on the negative real axis
    (sqrt(-4 ± 0i) = 0 ± 2i), sqrt(x ± inf i) = inf ± inf i, and the C99 specials. As XLA:CPU, a -0
    imaginary part counts as +0 (sqrt(-1 - 0i) = +i; C99: -i) and a NaN part gives NaN + NaN i."""
    x, y = z[0], z[1] + 0.0  # -0 + 0 = +0
    ax, ay = b.abs(x), b.abs(y)
    big, tiny, _ = _limits(x)
    down = ax.gt(big / 4) | ay.gt(big / 4)
    up = ~down & ax.lt(2 * tiny) & ay.lt(2 * tiny)
    k = (x.ty.mantissa_bits + 2) // 2  # scale tiny inputs by 2^(2k), their results by 2^-k
    factor = b.select(down, x.like(0.25), b.select(up, x.like(2.0 ** (2 * k)), 1.0))
    unscale = b.select(down, x.like(2.0), b.select(up, x.like(2.0**-k), 1.0))
    sx, sy = x * factor, y * factor
    sx = b.select(down & ax.le(big / 4) & ax.lt(4 * tiny), x.like(0.0), sx)  # glibc: no subnormal rounding
    d = hypot(b, sx, sy)
    r_pos = b.sqrt((d + sx) * 0.5)
    s_pos = (sy / r_pos) * 0.5
    s_neg = b.sqrt((d - sx) * 0.5)
    r_neg = b.abs((sy / s_neg) * 0.5)
    positive = sx.gt(0.0)
    r = b.select(positive, r_pos, r_neg) * unscale
    s = b.select(positive, s_pos, s_neg) * unscale
    general = (r, b.copysign(s, y))
    # a zero part
    on_real_axis = (b.select(x.lt(0.0), x.like(0.0), b.abs(b.sqrt(x))),
                    b.copysign(b.select(x.lt(0.0), b.sqrt(-x), x.like(0.0)), y))
    half = b.select(ay.ge(2 * tiny), b.sqrt(ay * 0.5), b.sqrt(ay * 2.0) * 0.5)
    on_imag_axis = (half, b.copysign(half, y))
    # infinities and NaN
    y_nan = y.isnan()
    nan = x.like(float("nan"))
    x_minus_inf = (b.select(y_nan, nan, 0.0), b.copysign(INF, y))
    x_plus_inf = (x, b.select(y_nan, nan, b.copysign(0.0, y)))
    y_inf = (x.like(INF), y)
    re, im = general
    cases = [
        (x.eq(0.0), on_imag_axis),
        (y.eq(0.0), on_real_axis),
        (x.isnan() | y_nan, (nan, nan)),
        (x.eq(INF), x_plus_inf),
        (x.eq(-INF), x_minus_inf),
        (b.isinf(ay), y_inf),
    ]
    for cond, (cr, ci) in cases:  # later cases take precedence
        re, im = b.select(cond, cr, re), b.select(cond, ci, im)
    return _nan_if_any_nan(b, z, (re, im))


# -- hyperbolic and trigonometric functions -------------------------------------------------------------


def _sincos(b: FloatBuilder, y: Val) -> tuple[Val, Val]:
    """(sin y, cos y); (y, 1) below the smallest normal number, as glibc's complex functions."""
    tiny = b.abs(y).le(_limits(y)[1])
    sin, cos = T.sin_cos(b, y, full_range=False)
    return b.select(tiny, y, sin), b.select(tiny, y.like(1.0), cos)


def _sinh_cosh(b: FloatBuilder, x: Val) -> tuple[Val, Val]:
    """(sinh x, cosh x) for |x| up to the overflow threshold of e^|x|: with u = e^|x| - 1,
    sinh |x| = (u + u / (u + 1)) / 2 (no cancellation near 0) and cosh |x| = (e + 1/e) / 2."""
    ax = b.abs(x)
    u = E.expm1(b, ax)
    e = u + 1.0
    sinh = b.copysign((u + u / e) * 0.5, x)
    return b.select(ax.le(_limits(x)[1]), x, sinh), e * 0.5 + 0.5 / e


def _half_scaled_exp(b: FloatBuilder, ax: Val, factor: Val) -> Val:
    """e^ax / 2 · factor for ax beyond the overflow threshold of e^ax, finite as long as the product
    is: (e^(ax/2) · factor / 2) · e^(ax/2) (a subnormal factor is not halved before it is scaled)."""
    h = E.exp(b, ax * 0.5)
    return ((h * factor) * 0.5) * h


def sinh(b: FloatBuilder, z: Complex) -> Complex:
    """glibc's csinh: sinh x cos y + i cosh x sin y (e^|x|/2 for cosh and |sinh| beyond the
    overflow threshold), and C99's specials."""
    x, y = z
    ax = b.abs(x)
    sin, cos = _sincos(b, y)
    sh, ch = _sinh_cosh(b, x)
    big = ax.gt(_exp_threshold(x))
    signed_cos = b.copysign(1.0, x) * cos
    re = b.select(big, _half_scaled_exp(b, ax, signed_cos), sh * cos)
    im = b.select(big, _half_scaled_exp(b, ax, sin), ch * sin)
    im = b.select(y.eq(0.0), y, im)
    nan = x.like(float("nan"))
    finite_x, finite_y = b.isfinite(x), b.isfinite(y)
    # x finite, y inf or NaN: ±0 + NaN i for x = ±0, else NaN + NaN i
    re = b.select(finite_x & ~finite_y, b.select(x.eq(0.0), x, nan), re)
    im = b.select(finite_x & ~finite_y, nan, im)
    # x infinite: inf·cis(y) signed by x; y = 0 keeps y; y inf or NaN gives inf + NaN i
    inf_x = b.isinf(x)
    re = b.select(inf_x, b.select(finite_y & y.ne(0.0), b.copysign(INF, signed_cos), x), re)
    im = b.select(inf_x, b.select(finite_y, b.select(y.eq(0.0), y, b.copysign(INF, sin)), nan), im)
    re = b.select(inf_x & ~finite_y, x.like(INF), re)
    # x NaN: NaN + NaN i, or NaN ± 0i for y = ±0
    re = b.select(x.isnan(), nan, re)
    im = b.select(x.isnan(), b.select(y.eq(0.0), y, nan), im)
    return re, im


def cosh(b: FloatBuilder, z: Complex) -> Complex:
    """glibc's ccosh: cosh x cos y + i sinh x sin y (as csinh near overflow), and C99's specials."""
    x, y = z
    ax = b.abs(x)
    sin, cos = _sincos(b, y)
    sh, ch = _sinh_cosh(b, x)
    big = ax.gt(_exp_threshold(x))
    signed_sin = b.copysign(1.0, x) * sin
    re = b.select(big, _half_scaled_exp(b, ax, cos), ch * cos)
    im = b.select(big, _half_scaled_exp(b, ax, signed_sin), sh * sin)
    im = b.select(y.eq(0.0), y * b.copysign(1.0, x), im)
    nan = x.like(float("nan"))
    finite_x, finite_y = b.isfinite(x), b.isfinite(y)
    # x finite, y inf or NaN: NaN + 0i for x = 0, else NaN + NaN i
    re = b.select(finite_x & ~finite_y, nan, re)
    im = b.select(finite_x & ~finite_y, b.select(x.eq(0.0), x.like(0.0), nan), im)
    # x infinite: inf·cis(y) (imaginary part signed by x); y = 0: inf ± 0i; y inf or NaN: inf + NaN i
    inf_x = b.isinf(x)
    re = b.select(inf_x, b.select(finite_y & y.ne(0.0), b.copysign(INF, cos), x.like(INF)), re)
    im = b.select(inf_x, b.select(finite_y, b.select(y.eq(0.0), y * b.copysign(1.0, x), b.copysign(INF, signed_sin)),
                                  nan), im)
    # x NaN: NaN + NaN i, or NaN ± 0i for y = ±0
    re = b.select(x.isnan(), nan, re)
    im = b.select(x.isnan(), b.select(y.eq(0.0), y, nan), im)
    return re, im


def tanh(b: FloatBuilder, z: Complex) -> Complex:
    """glibc's ctanh: (sinh x cosh x + i sin y cos y) / (sinh² x + cos² y); beyond |x| > t/2 the
    real part is ±1 and the imaginary part 4 sin y cos y e^(-2|x|) (computed without overflow);
    tanh(±inf + iy) = ±1 ± 0i, tanh(NaN ± 0i) = NaN ± 0i, other non-finite inputs NaN (a zero
    real part kept)."""
    x, y = z
    ax = b.abs(x)
    sin, cos = _sincos(b, y)
    t = float(int(_exp_threshold(x) / 2))
    exp_2t = x.like(float(E_EXP_2T[x.ty]))
    rest = ax - t
    beyond = (4.0 * sin * cos) / exp_2t
    beyond = beyond / b.select(rest.gt(t), exp_2t, E.exp(b, 2.0 * b.minimum(rest, t)))
    sh, ch = _sinh_cosh(b, x)
    eps = _limits(x)[2]
    den = b.select(b.abs(sh).gt(b.abs(cos) * eps), sh * sh + cos * cos, cos * cos)
    big = ax.gt(t)
    re = b.select(big, b.copysign(1.0, x), sh * ch / den)
    im = b.select(big, beyond, sin * cos / den)
    # non-finite inputs
    nan = x.like(float("nan"))
    inf_x = b.isinf(x)
    sin_cos_sign = b.select(b.isfinite(y) & b.abs(y).gt(1.0), sin * cos, y)
    finite = b.isfinite(x) & b.isfinite(y)
    re = b.select(finite, re, b.select(inf_x, b.copysign(1.0, x), b.select(y.eq(0.0) | x.eq(0.0), x, nan)))
    im = b.select(finite, im, b.select(inf_x, b.copysign(0.0, sin_cos_sign), b.select(y.eq(0.0), y, nan)))
    return re, im


E_EXP_2T = {F32: 1.6516362661361307e38, F64: 3.023383144276055e307}
"""e^(2t), t = (max exponent - 1) ln 2 / 2 truncated (44 for f32, 354 for f64): glibc's exp_2t."""


def _swap(z: Complex) -> Complex:
    return z[1], z[0]


def sin(b: FloatBuilder, z: Complex) -> Complex:
    """sin(a + bi) = sinh(b + ai) with the parts swapped (sin a cosh b + i cos a sinh b)."""
    return _swap(sinh(b, _swap(z)))


def cos(b: FloatBuilder, z: Complex) -> Complex:
    """cos z = cosh(iz) = cosh(-b + ai) (glibc's ccos)."""
    return cosh(b, (-z[1], z[0]))


def tan(b: FloatBuilder, z: Complex) -> Complex:
    """tan(a + bi) = tanh(b + ai) with the parts swapped (glibc's ctan is ctanh's mirror image)."""
    return _swap(tanh(b, _swap(z)))


# -- the evaluator's own formulas -----------------------------------------------------------------------


def expm1(b: FloatBuilder, z: Complex) -> Complex:
    """e^z - 1 without cancellation near 0: re = expm1(a) cos b - 2 sin²(b/2), im = e^a sin b (b for
    b = 0, so e^inf · 0 is not NaN)."""
    a, c = z
    s = T.sin_cos(b, c * 0.5, full_range=False)[0]
    sin_c, cos_c = T.sin_cos(b, c, full_range=False)
    re = E.expm1(b, a) * cos_c - 2.0 * (s * s)
    im = b.select(c.eq(0.0), c, E.exp(b, a) * sin_c)
    return re, im


def log1p(b: FloatBuilder, z: Complex) -> Complex:
    """log(1 + z): re = log1p(a(2 + a) + b²) / 2 where max(|a|, |b|) < 1/2, else log(hypot(1 + a, b));
    im = atan2(b, 1 + a)."""
    a, c = z
    small = b.maximum(b.abs(a), b.abs(c)).lt(0.5)
    near = 0.5 * E.log1p(b, a * (2.0 + a) + c * c)
    one_plus_a = 1.0 + a
    far = E.log(b, hypot(b, one_plus_a, c))
    return _nan_if_any_nan(b, z, (b.select(small, near, far), T.atan2(b, c, one_plus_a)))
