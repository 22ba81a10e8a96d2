"""Trigonometric functions as `FloatBuilder` functions (f32 and f64).

sin, cos, tan: x = k*pi/2 + r with |r| <= pi/4, then Cephes' minimax polynomials on r (`sinf`/`cosf`/
`tanf` for f32, evaluated in f64 and rounded once; `sin`/`cos`/`tan` for f64) and the quadrant k mod 4
picks and signs the result. The reduction:
- f32: exact for every f32, in f64 arithmetic without tables (what libm's Payne-Hanek reduction gives,
  without its per-exponent table lookup, which this vocabulary has no op for): 2/pi is split into
  29-bit parts, so x * part is exact (24 + 29 significant bits); each product is reduced mod 4
  exactly and the products are summed in double-double arithmetic. Eight parts (232 bits of 2/pi)
  leave an error below 2^-104 for |x| < 2^128, far below the smallest |r| of any f32.
- f64: Cody-Waite reduction against pi/2 split into 20-bit parts, so k*part is exact for |k| < 2^33,
  accurate for |x| < 2^33 * pi/2 (about 1.35e10). Beyond it, Payne-Hanek (`_reduce_pio2_payne_hanek`):
  only 7 chunks of 27 bits of 2/pi, chosen by x's exponent, matter; the table lookup is a barrel
  shifter of selects over the constant chunks (the vocabulary has no gather) and each product of a
  26-bit half of x with a chunk is exact. Within 1 ulp (sin, cos), 2 (tan) over the whole range, as
  XLA:CPU's libm calls are (sin(9.2e18) = 0.99993). Both reductions run on every element: an f64 sin
  costs about 4x its former ops (417 against ~110) and ~5.6x its time, still faster than XLA:CPU's
  scalar libm loop (1M elements: 1.2 -> 6.8 ms, XLA 12.3 ms; median of 30, shared 2-core machine).
  The complex functions keep Cody-Waite alone (`full_range=False`): c64's compute in c128, and the
  exact reduction made c64 exp 3x slower (5.5 -> 16 ms per 1M) for arguments no c64 program has;
  beyond 1.35e10 their sin/cos stay bounded but are not XLA's.

atan: Cephes' reduction to |t| <= tan(pi/8) via pi/4 and pi/2 offsets, then a polynomial (f32
`atanf`) or rational form (f64 `atan`). atan2 from atan(min/max) and octant corrections with
C99's special cases (signed zeros, infinities).
"""

from __future__ import annotations

import math

from hlocc.codegen.math.float_builder import F32, F64, FloatBuilder, Val

_TWO_OVER_PI = 0.6366197723675814
# pi/2 in parts of 20 significant bits (the last one rounded to 53 bits), for f64's Cody-Waite.
_PIO2_PARTS = tuple(map(float.fromhex, ("0x1.921fap+0", "0x1.54442p-20", "0x1.a308cp-41", "0x1.31318p-61",
                                        "0x1.8a2e03707344ap-81")))
# 2/pi in parts of 29 significant bits (leading zeros included): bits 1-232 of its binary expansion.
_TWO_OVER_PI_PARTS = tuple(map(float.fromhex, (
    "0x1.45f306dp-1", "0x1.9391054p-30", "0x1.4fe13abp-59", "0x1.d1f534dp-88", "0x1.b81b6c5p-117",
    "0x1.5993c4p-148", "0x1.c820ff2p-175", "0x1.163abdep-204")))
_REDUCED_PARTS = 5  # x * part can reach 4 for these (|x| < 2^128); the others' products stay below 2^-18


def _two_over_pi_bits(n: int) -> int:
    """floor(2/pi * 2^n), from Machin's formula in integer arithmetic with 64 guard bits."""
    scale = 1 << (n + 64)

    def atan_inverse(k: int) -> int:  # atan(1/k) * scale, to a few units
        total, power, i = 0, scale // k, 0
        while power:
            total += (-1) ** i * (power // (2 * i + 1))
            power //= k * k
            i += 1
        return total

    pi = 16 * atan_inverse(5) - 4 * atan_inverse(239)
    return ((2 * scale * scale) // pi) >> 64


# f64's exact reduction (`_reduce_pio2_payne_hanek`): bits 1 to 27*47 of 2/pi in 27-bit integers.
_CHUNK_BITS, _CHUNKS, _WINDOW = 27, 47, 7
_TWO_OVER_PI_CHUNKS = tuple(
    float((_two_over_pi_bits(_CHUNK_BITS * _CHUNKS) >> (_CHUNK_BITS * (_CHUNKS - 1 - j))) & ((1 << _CHUNK_BITS) - 1))
    for j in range(_CHUNKS))
_CODY_WAITE_LIMIT = 2.0**33 * math.pi / 2  # f64's Cody-Waite reduction is accurate below this
_PIO2_LO_F64 = 6.123233995736766e-17  # pi/2 - fl64(pi/2)
_PIO2_HI = float.fromhex("0x1.921fb54442d18p+0")
# |x| below this: sin(x) = tan(x) = x after rounding (x^2/3 < half an ulp); also keeps -0.
_TINY = {F32: 2.0**-12, F64: 2.0**-27}

_SINF = (-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1)
_COSF = (2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2)
_TANF = (9.38540185543e-3, 3.11992232697e-3, 2.44301354525e-2, 5.34112807005e-2, 1.33387994085e-1,
         3.33331568548e-1)
_SIN = (1.58962301576546568060e-10, -2.50507477628578072866e-8, 2.75573136213857245213e-6,
        -1.98412698295895385996e-4, 8.33333333332211858878e-3, -1.66666666666666307295e-1)
_COS = (-1.13585365213876817300e-11, 2.08757008419747316778e-9, -2.75573141792967388112e-7,
        2.48015872888517045348e-5, -1.38888888888730564116e-3, 4.16666666666665929218e-2)
_TAN_P = (-1.30936939181383777646e4, 1.15351664838587416140e6, -1.79565251976484877988e7)
_TAN_Q = (1.36812963470692954678e4, -1.32089234440210967447e6, 2.50083801823357915839e7,
          -5.38695755929454629881e7)


def _reduce_pio2(b: FloatBuilder, x: Val) -> tuple[Val, Val, Val]:
    """(r, r_lo, q): x = k*pi/2 + r + r_lo, q = k mod 4 as a float in {0, 1, 2, 3}; all f64 (f64 x).

    x - k*p1 - k*p2 is exact, - k*p3 by a two-sum; the smaller products are summed and
    subtracted once, and the rounding errors are kept in r_lo."""
    k = b.roundeven(x * _TWO_OVER_PI)
    p1, p2, p3, *small = _PIO2_PARTS
    head = (x - k * p1) - k * p2  # exact: the products are, and the differences cancel
    h, err = b.two_sum(head, -(k * p3))  # exact when the result is small, else its error kept
    tail = k * small[-1]
    for part in reversed(small[:-1]):
        tail = tail + k * part
    r = h - tail
    r_lo = ((h - r) - tail) + err
    # Both clamps bite only beyond the accurate range, where the reduction's errors are as large as
    # x's ulp: they keep the polynomials' arguments, and so sin and cos, bounded (an unclamped r_lo
    # made sin(1.8e308) = -1.3e274).
    r = b.clamp(r, -1.0, 1.0)
    r_lo = b.clamp(r_lo, -(2.0**-30), 2.0**-30)
    return r, r_lo, k - 4.0 * b.floor(k * 0.25)


def _reduce_pio2_exact(b: FloatBuilder, x: Val) -> tuple[Val, Val, Val]:
    """`_reduce_pio2` for an f32 value widened to f64, exact for all of them (see the module doc).

    Each x * part is exact, and so is its reduction mod 4 to [-2, 2] (a difference of multiples of
    its ulp, below 2 in magnitude); parts whose products are multiples of 4 vanish. The sum of the
    reduced products, x*2/pi mod 4 up to a multiple of 4, is kept as a double-double (s, err).
    The last parts' products are below 2^-18 for any f32 (|x| < 2^128): they need neither the
    reduction nor the exact sum (their rounding errors stay below 2^-70). An f32 result needs r
    only to about 2^-30 relative, so r = f * pi/2 in plain f64 arithmetic and r_lo = 0."""
    s, err = x.like(0.0), x.like(0.0)
    for part in _TWO_OVER_PI_PARTS[:_REDUCED_PARTS]:
        t = x * part
        t = t - 4.0 * b.roundeven(t * 0.25)
        s, e = b.two_sum(s, t)
        err = err + e
    tail = x * _TWO_OVER_PI_PARTS[_REDUCED_PARTS]
    for part in _TWO_OVER_PI_PARTS[_REDUCED_PARTS + 1:]:
        tail = tail + x * part
    k = b.roundeven(s)
    f = (s - k) + (err + tail)  # s - k is exact; f in [-1/2, 1/2] up to rounding
    return f * _PIO2_HI, x.like(0.0), k - 4.0 * b.floor(k * 0.25)


def _window(b: FloatBuilder, j0: Val, like: Val) -> list[Val]:
    """The chunks j0 .. j0+6 of `_TWO_OVER_PI_CHUNKS` for a per-element index j0 in [0, 40] (an
    i64), without a gather: a barrel shifter over the constant table, one stage per bit of j0 from
    the highest (99 selects); indices past the table only meet elements that never take them."""
    entries: list[Val | float] = list(_TWO_OVER_PI_CHUNKS)
    for bit in reversed(range(6)):
        step = 1 << bit
        keep = _WINDOW + step - 1 if bit else _WINDOW  # the largest shift still to come, plus the window
        taken = (j0.shru(bit) & 1).ne(0)
        entries = [b.select(taken, like.like(entries[k + step]) if k + step < len(entries) else like.like(0.0),
                            like.like(entries[k])) for k in range(keep)]
    return entries


def _reduce_pio2_payne_hanek(b: FloatBuilder, x: Val) -> tuple[Val, Val, Val]:
    """`_reduce_pio2` for any f64, exact up to ~2^-100 of the quarter period (Payne-Hanek).

    |x| = m * 2^E with m a 53-bit integer; its products with the bits of 2/pi worth 2^(2-E) and
    more are multiples of 4 and vanish, so only the 7 chunks of 27 bits from j0 = floor((E-2)/27)
    on matter. |x| is scaled by 2^(-27 j0) (exact), split into two 26-bit halves, and each half
    times each chunk is exact; the 4 leading chunks' products are reduced mod 4 exactly, the
    first 5 summed as a double-double and the last 2 (below 2^-53) plainly, as for f32. Only
    where one multiple of pi/2 is closer than ~2^-50 to x does the result lose accuracy."""
    a = b.abs(x)
    e0 = b.int_to_float(((b.bits(a).shru(52)) & 0x7FF) - 1023, F64)  # floor(log2 |x|)
    j0 = b.maximum(b.floor((e0 - 54.0) / float(_CHUNK_BITS)), 0.0)
    chunks = _window(b, b.float_to_int(j0), a)
    scaled = b.ldexp(a, -float(_CHUNK_BITS) * j0)
    halves = b.split(scaled)
    s, err, tail = a.like(0.0), a.like(0.0), a.like(0.0)
    for i, chunk in enumerate(chunks):
        weight = 2.0 ** (-_CHUNK_BITS * (i + 1))
        for half in halves:
            t = half * chunk * weight
            if i < 4:
                t = t - 4.0 * b.roundeven(t * 0.25)
            if i < 5:
                s, e = b.two_sum(s, t)
                err = err + e
            else:
                tail = tail + t
    sign = b.copysign(1.0, x)
    s, err, tail = s * sign, err * sign, tail * sign
    k = b.roundeven(s)
    f, f_lo = b.two_sum(s - k, err + tail)
    r, r_err = b.two_prod(f, x.like(_PIO2_HI))
    r_lo = r_err + (f * _PIO2_LO_F64 + f_lo * _PIO2_HI)
    r, r_lo = b.two_sum(r, r_lo)
    return r, r_lo, k - 4.0 * b.floor(k * 0.25)


def _reduce_pio2_f64(b: FloatBuilder, x: Val, full_range: bool = True) -> tuple[Val, Val, Val]:
    """Cody-Waite where it is accurate, Payne-Hanek beyond (both computed: the kernels branch on
    no element); Cody-Waite alone unless `full_range`."""
    near = _reduce_pio2(b, x)
    if not full_range:
        return near
    far = _reduce_pio2_payne_hanek(b, x)
    use_far = b.abs(x).ge(_CODY_WAITE_LIMIT)
    return tuple(b.select(use_far, f, n) for f, n in zip(far, near))


def _sin_cos_tan(b: FloatBuilder, x: Val, kinds: tuple[str, ...], full_range: bool = True) -> tuple[Val, ...]:
    """sin, cos and/or tan of x (in the order `kinds` names them) from one range reduction."""
    fmt = x.ty
    wide = b.extf(x, F64) if fmt == F32 else x
    r, r_lo, q = _reduce_pio2_exact(b, wide) if fmt == F32 else _reduce_pio2_f64(b, wide, full_range)
    z = r * r
    odd = q.eq(1.0) | q.eq(3.0)
    results = []
    for kind in kinds:
        if kind == "tan":
            if fmt == F32:
                t = r + r * z * b.horner(z, _TANF)
            else:  # tan(r + r_lo) = tan(r) + r_lo * (1 + tan(r)^2)
                t = r + (r * (z * b.horner(z, _TAN_P) / b.horner_monic(z, _TAN_Q)) + r_lo * (1.0 + z))
            res = b.select(odd, -1.0 / t, t)
        else:
            if fmt == F32:
                s = r + r * z * b.horner(z, _SINF)
                c = (1.0 - 0.5 * z) + z * z * b.horner(z, _COSF)
            else:  # sin(r + r_lo) = sin(r) + r_lo * cos(r), cos(r + r_lo) = cos(r) - r_lo * sin(r)
                hz = 0.5 * z
                s = r + (r * z * b.horner(z, _SIN) + r_lo * (1.0 - hz))
                w = 1.0 - hz
                c = w + (((1.0 - w) - hz) + (z * z * b.horner(z, _COS) - r * r_lo))
            if kind == "sin":
                res = b.select(odd, c, s)
                negate = q.ge(2.0)
            else:
                res = b.select(odd, s, c)
                negate = q.eq(1.0) | q.eq(2.0)
            res = b.select(negate, -res, res)
        if fmt == F32:
            res = b.truncf(res, F32)
        if kind != "cos":
            res = b.select(b.abs(x).lt(_TINY[fmt]), x, res)
        results.append(res)
    return tuple(results)


def sin(b: FloatBuilder, x: Val) -> Val:
    return _sin_cos_tan(b, x, ("sin",))[0]


def cos(b: FloatBuilder, x: Val) -> Val:
    return _sin_cos_tan(b, x, ("cos",))[0]


def tan(b: FloatBuilder, x: Val) -> Val:
    return _sin_cos_tan(b, x, ("tan",))[0]


def sin_cos(b: FloatBuilder, x: Val, full_range: bool = True) -> tuple[Val, Val]:
    """(sin x, cos x), the same values as `sin` and `cos`, from one range reduction. f64 without
    `full_range`: Cody-Waite's reduction only, accurate below 2^33 * pi/2 and bounded beyond (what
    the complex functions use; see the module doc)."""
    return _sin_cos_tan(b, x, ("sin", "cos"), full_range)


# -- atan, atan2 ---------------------------------------------------------------------------------

_TAN_3PI_8 = 2.414213562373095
_ATANF = (8.05374449538e-2, -1.38776856032e-1, 1.99777106478e-1, -3.33329491539e-1)
_ATAN_P = (-8.750608600031904122785e-1, -1.615753718733365076637e1, -7.500855792314704667340e1,
           -1.228866684490136173410e2, -6.485021904942025371773e1)
_ATAN_Q = (2.485846490142306297962e1, 1.650270098316988542046e2, 4.328810604912902668951e2,
           4.853903996359136964868e2, 1.945506571482613964425e2)
_PIO2_LO = 6.123233995736765886130e-17  # pi/2 - fl64(pi/2)
_PIO2_F32_LO = -4.371138828673793e-08  # pi/2 - fl32(pi/2)


def atan(b: FloatBuilder, x: Val) -> Val:
    a = b.abs(x)
    mid_bound = 0.4142135623730950 if x.ty == F32 else 0.66
    big = a.gt(_TAN_3PI_8)
    mid = a.gt(mid_bound)
    t = b.select(big, -1.0 / a, b.select(mid, (a - 1.0) / (a + 1.0), a))
    base = b.select(big, x.like(math.pi / 2), b.select(mid, x.like(math.pi / 4), 0.0))
    lo = _PIO2_F32_LO if x.ty == F32 else _PIO2_LO  # pi/2 - base, added before base
    more = b.select(big, x.like(lo), b.select(mid, x.like(0.5 * lo), 0.0))
    z = t * t
    if x.ty == F32:
        p = b.horner(z, _ATANF) * z * t + t
    else:
        p = t * (z * b.horner(z, _ATAN_P) / b.horner_monic(z, _ATAN_Q)) + t
    return b.copysign(base + (p + more), x)


def atan2(b: FloatBuilder, y: Val, x: Val) -> Val:
    """atan2(y, x) in (-pi, pi], C99 specials: atan2(+-0, +0) = +-0, atan2(+-0, -0) = +-pi,
    atan2(+-inf, +inf) = +-pi/4, atan2(+-inf, -inf) = +-3pi/4; NaN if either is NaN."""
    ax, ay = b.abs(x), b.abs(y)
    steep = ay.gt(ax)
    num = b.select(steep, ax, ay)
    den = b.select(steep, ay, ax)
    q = num / den
    q = b.select(den.eq(0.0), x.like(0.0), q)
    q = b.select(b.isinf(ax) & b.isinf(ay), x.like(1.0), q)
    t = atan(b, q)  # in [0, pi/4]
    lo = _PIO2_F32_LO if x.ty == F32 else _PIO2_LO
    hi = math.pi / 2
    t = b.select(steep, (x.like(hi) - t) + lo, t)
    t = b.select(b.signbit(x), (x.like(2 * hi) - t) + 2 * lo, t)
    res = b.copysign(t, y)
    return b.select(x.isnan() | y.isnan(), x + y, res)
