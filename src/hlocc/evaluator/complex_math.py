"""Complex functions of the evaluator where numpy's (C99 Annex G's) results are not XLA:CPU's:
XLA's complex abs, sqrt, log and log1p are plain formulas (a NaN part gives NaN + NaN i), sqrt
reads a -0 imaginary part as +0, and exp(z) - 1 and log(1 + z) keep their digits near 0."""

from __future__ import annotations

import numpy as np

_C128 = np.complex128


def complex_expm1(z: np.ndarray) -> np.ndarray:
    """exp(z) - 1 without cancellation near 0: re = expm1(a)cos(b) - 2sin²(b/2), im = e^a sin(b)."""
    a, b = z.real, z.imag
    out = np.empty(z.shape, _C128)
    out.real = np.expm1(a) * np.cos(b) - 2.0 * np.sin(0.5 * b) ** 2
    out.imag = np.where(b == 0, b, np.exp(a) * np.sin(b))  # keeps e^inf * 0 from becoming NaN
    return out


def nan_if_any_nan(z: np.ndarray, w: np.ndarray) -> np.ndarray:
    """w, or NaN + NaN i where a part of z is NaN: XLA:CPU's complex abs, sqrt, log and log1p are
    plain formulas without C99 Annex G's infinities (log(NaN + inf i) = NaN + NaN i, where numpy
    gives inf + NaN i)."""
    nan = np.isnan(z.real) | np.isnan(z.imag)
    out = np.array(w)
    out.real = np.where(nan, np.nan, out.real)
    out.imag = np.where(nan, np.nan, out.imag)
    return out


def complex_log1p(z: np.ndarray) -> np.ndarray:
    """log(1 + z) with re = log1p(2a + a² + b²)/2 near 0, where forming 1 + z would lose digits."""
    a, b = z.real, z.imag
    out = np.empty(z.shape, _C128)
    small = np.maximum(np.abs(a), np.abs(b)) < 0.5
    out.real = np.where(small, 0.5 * np.log1p(a * (2.0 + a) + b * b), np.log(np.hypot(1.0 + a, b)))
    out.imag = np.arctan2(b, 1.0 + a)
    return nan_if_any_nan(z, out)


def complex_log(z: np.ndarray) -> np.ndarray:
    return nan_if_any_nan(z, np.log(z))


def complex_sqrt(z: np.ndarray) -> np.ndarray:
    """C99's csqrt (numpy) but, as XLA:CPU, a -0 imaginary part counts as +0 (sqrt(-1 - 0i) = +i,
    C99: -i) and a NaN part gives NaN + NaN i."""
    positive_zero = np.array(z)
    positive_zero.imag = positive_zero.imag + 0.0  # -0 + 0 = +0
    return nan_if_any_nan(z, np.sqrt(positive_zero))


def complex_power(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """1^y = x^0 = 1; inf^(r+0i) is inf for r > 0 and 0 for r < 0 (HloEvaluator's rules); 0^y is 0
    for a real y > 0 and NaN + NaN i for any other y but 0 (XLA:CPU's EmitComplexPower, whose
    formula gives NaN there: HloEvaluator's std::pow gives 0 for any Re(y) > 0); otherwise
    exp(y log x)."""
    x, y = a.astype(_C128), b.astype(_C128)
    with np.errstate(all="ignore"):
        result = np.exp(y * np.log(x))
    result = np.where(x == 0, np.where((y.real > 0) & (y.imag == 0), 0, complex(np.nan, np.nan)), result)
    positive_inf = (x.imag == 0) & np.isposinf(x.real)
    real_y = y.imag == 0
    result = np.where(positive_inf & real_y & (y.real > 0), x, result)
    result = np.where(positive_inf & real_y & (y.real < 0), 0, result)
    return np.where((x == 1) | (y == 0), 1, result)


def complex_divide(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x / y: numpy's Smith division, then XLA's EmitComplexDivide's cases for a NaN + NaN i quotient
    (numpy's own for a zero divisor aside, which reads |y.re| and gives NaN for XLA's Smith quotient):
    a zero divisor gives copysign(inf, y.re) times each part of x (x not NaN + NaN i); an infinite x
    over a finite y, inf * (u·ȳ) with u x's infinities as ±1 (finite parts 0); a finite x over an
    infinite y, 0 * (x·v̄) with v y's infinities as ±1: (2 - 3i) / (inf + inf i) = -0 - 0i.
    Finite quotients are numpy's (XLA divides by the denominator, fused: within an ulp or two)."""
    ar, ai, br, bi = x.real, x.imag, y.real, y.imag
    with np.errstate(all="ignore"):
        quotient = np.divide(x, y)
        zero = (br == 0) & (bi == 0)
        nan = zero | (np.isnan(quotient.real) & np.isnan(quotient.imag))
        if not nan.any():
            return quotient
        inf, one = ar.dtype.type(np.inf), ar.dtype.type(1)
        by_zero = zero & ~(np.isnan(ar) & np.isnan(ai))
        infinite_x = (np.isinf(ar) | np.isinf(ai)) & np.isfinite(br) & np.isfinite(bi)
        infinite_y = (np.isinf(br) | np.isinf(bi)) & np.isfinite(ar) & np.isfinite(ai)
        ur, ui = (np.copysign(np.where(np.isinf(p), one, 0), p) for p in (ar, ai))
        vr, vi = (np.copysign(np.where(np.isinf(p), one, 0), p) for p in (br, bi))
        s = np.copysign(inf, br)
        parts = []
        for zero_case, inf_case, finite_case in ((s * ar, inf * (ur * br + ui * bi), 0 * (ar * vr + ai * vi)),
                                                 (s * ai, inf * (ui * br - ur * bi), 0 * (ai * vr - ar * vi))):
            parts.append(np.where(by_zero, zero_case, np.where(infinite_x, inf_case,
                                                               np.where(infinite_y, finite_case, np.nan))))
    out = np.array(quotient)
    out.real = np.where(nan, parts[0], quotient.real)
    out.imag = np.where(nan, parts[1], quotient.imag)
    return out


def reciprocal(x: np.ndarray) -> np.ndarray:
    """1 / x; complex as XLA divides (`complex_divide`), as the kernels' compositions do."""
    return complex_divide(np.ones_like(x), x) if np.iscomplexobj(x) else 1.0 / x
