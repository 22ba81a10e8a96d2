"""Accuracy of expand-float-ops' approximations, run through the numpy builder (the same code the
pass emits, op for op). Errors are ulps between the result and the correctly rounded reference;
references: numpy float64 (f32 tests), numpy longdouble (f64 tests; scipy's erf for f64 erf).
The default run samples 2^14 log-spaced + 2^14 uniform inputs per function and format; the slow
run 2^20 + 2^20."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special

from hlocc.codegen.math import approx_exp_log as E
from hlocc.codegen.math import approx_special as S
from hlocc.codegen.math import approx_trig as T
from hlocc.codegen.math.float_builder import F32, F64
from hlocc.codegen.math.float_builder_numpy import evaluate

L = np.longdouble
BIG_TRIG = float(np.finfo(np.float32).max)  # f32's sin/cos/tan reduce exactly at any magnitude,
BIG_TRIG_F64 = float(np.finfo(np.float64).max)  # and f64 too (Cody-Waite, then Payne-Hanek)

# name: (approximation, reference, uniform range, magnitude range of the log-spaced sample, sign, ulps f32, f64)
TANH_FMA_ULPS = 5  # XLA:CPU's FMA form of the same rational (tanh_fma)

UNARY = {
    "exp": (E.exp, np.exp, (-110, 90), (1e-40, 800), True, 1, 2),
    "exp2": (E.exp2, np.exp2, (-160, 130), (1e-40, 1100), True, 1, 2),
    "exp_fma": (E.exp_fma, np.exp, (-110, 90), (1e-40, 800), True, 1, 2),  # expand-float-ops-fma's
    "exp2_fma": (E.exp2_fma, np.exp2, (-160, 130), (1e-40, 1100), True, 1, 2),
    "expm1": (E.expm1, np.expm1, (-2, 2), (1e-40, 800), True, 2, 3),
    "log": (E.log, np.log, (0, 4), (0, np.inf), False, 1, 1),
    "log2": (E.log2, np.log2, (0, 4), (0, np.inf), False, 1, 1),
    "log10": (E.log10, np.log10, (0, 4), (0, np.inf), False, 1, 1),
    "log1p": (E.log1p, np.log1p, (-1, 2), (0, np.inf), True, 2, 2),
    "sin": (T.sin, np.sin, (-10, 10), (0, BIG_TRIG), True, 1, 1),
    "cos": (T.cos, np.cos, (-10, 10), (0, BIG_TRIG), True, 1, 1),
    "tan": (T.tan, np.tan, (-10, 10), (0, BIG_TRIG), True, 1, 2),
    "atan": (T.atan, np.arctan, (-4, 4), (0, np.inf), True, 2, 1),
    "tanh": (S.tanh, np.tanh, (-10, 10), (0, np.inf), True, 7, 8),
    "tanh_fma": (S.tanh_fma, np.tanh, (-10, 10), (0, np.inf), True, TANH_FMA_ULPS, 8),
    "erf": (S.erf, scipy.special.erf, (-5, 5), (0, np.inf), True, 6, 2),
    "cbrt": (S.cbrt, np.cbrt, (-10, 10), (0, np.inf), True, 1, 1),
    "rsqrt": (S.rsqrt, lambda x: 1 / np.sqrt(x), (0, 10), (0, np.inf), False, 1, 1),
}
BINARY = {  # name: (approximation, reference, ulps f32, f64)
    "atan2": (T.atan2, np.arctan2, 2, 2),
    "powf": (E.powf, np.power, 1, 2),
}


def _sample(dtype, uniform, magnitudes, signed, n, seed):
    if dtype == np.float64 and magnitudes[1] == BIG_TRIG:
        magnitudes = (magnitudes[0], BIG_TRIG_F64)
    rng = np.random.default_rng(seed)
    fi = np.finfo(dtype)
    lo, hi = max(magnitudes[0], float(fi.smallest_subnormal)), min(magnitudes[1], float(fi.max))
    mags = np.exp(rng.uniform(np.log(lo), np.log(hi), n))
    if signed:
        mags *= rng.choice([-1.0, 1.0], n)
    x = np.concatenate([mags, rng.uniform(*uniform, n)]).astype(dtype)
    return x[np.isfinite(x)]


def _ordinal(a: np.ndarray) -> np.ndarray:
    """Integers ordered like the floats, adjacent floats one apart (+0 and -0 both 0)."""
    i = a.view(np.int32 if a.dtype == np.float32 else np.int64).astype(np.int64)
    return np.where(i < 0, -(i & np.iinfo(np.int64).max if a.dtype == np.float64 else i & 0x7FFFFFFF), i)


def _ulp_error(got: np.ndarray, ref_wide: np.ndarray) -> np.ndarray:
    """ulps between got and the reference rounded to got's format; NaN must match NaN."""
    with np.errstate(all="ignore"):
        ref = ref_wide.astype(got.dtype)
    both_nan = np.isnan(got) & np.isnan(ref)
    err = np.abs(_ordinal(np.where(both_nan, 0, got).astype(got.dtype)) - _ordinal(np.where(both_nan, 0, ref)))
    return np.where(np.isnan(got) != np.isnan(ref), np.iinfo(np.int64).max, err)


def _reference(ref, fmt, *args):
    with np.errstate(all="ignore"):
        if fmt == F32 or ref is scipy.special.erf:
            return ref(*(a.astype(np.float64) for a in args))
        return ref(*(a.astype(L) for a in args))


def _check(name, fn, ref, fmt, budget, *args):
    got = evaluate(fn, fmt, *args)
    err = _ulp_error(got, _reference(ref, fmt, *args))
    worst = int(np.argmax(err))
    assert err[worst] <= budget, (f"{name} {fmt}: {err[worst]} ulp > {budget} at "
                                  f"{[a[worst] for a in args]}: got {got[worst]!r}")


@pytest.mark.parametrize("fmt", [F32, F64], ids=str)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_accuracy(name, fmt):
    fn, ref, uniform, mags, signed, b32, b64 = UNARY[name]
    x = _sample(np.float32 if fmt == F32 else np.float64, uniform, mags, signed, 1 << 14, hash(name) % 1000)
    _check(name, fn, ref, fmt, b32 if fmt == F32 else b64, x)


@pytest.mark.parametrize("fmt", [F32, F64], ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_accuracy(name, fmt):
    fn, ref, b32, b64 = BINARY[name]
    dtype = np.float32 if fmt == F32 else np.float64
    rng = np.random.default_rng(7)
    n = 1 << 14
    if name == "powf":  # bases across the range, exponents that keep many results finite
        x = np.exp(rng.uniform(-80, 80, n)) * rng.choice([-1, 1], n)
        y = np.concatenate([rng.uniform(-30, 30, n // 2), rng.integers(-40, 40, n - n // 2)])
        x, y = x.astype(dtype), y.astype(dtype)
    else:
        x = _sample(dtype, (-10, 10), (0, np.inf), True, n // 2, 3)
        y = _sample(dtype, (-10, 10), (0, np.inf), True, n // 2, 4)
        k = min(len(x), len(y))
        x, y = x[:k], y[:k]
    _check(name, fn, ref, fmt, b32 if fmt == F32 else b64, *((y, x) if name == "atan2" else (x, y)))


@pytest.mark.slow
@pytest.mark.parametrize("fmt", [F32, F64], ids=str)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_accuracy_dense(name, fmt, request):
    if "slow" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("dense sweep: run with -m slow")
    fn, ref, uniform, mags, signed, b32, b64 = UNARY[name]
    x = _sample(np.float32 if fmt == F32 else np.float64, uniform, mags, signed, 1 << 20, 11)
    _check(name, fn, ref, fmt, b32 if fmt == F32 else b64, x)


INF, NAN = np.inf, np.nan
# (function, arguments, expected): compared bit for bit (signed zeros), NaN as any NaN.
SPECIALS = [
    (E.exp, (-INF,), 0.0), (E.exp, (INF,), INF), (E.exp, (NAN,), NAN), (E.exp, (1000.0,), INF),
    (E.exp, (-1000.0,), 0.0), (E.exp_fma, (-INF,), 0.0), (E.exp_fma, (INF,), INF), (E.exp_fma, (NAN,), NAN),
    (E.exp_fma, (1000.0,), INF), (E.exp_fma, (-1000.0,), 0.0), (E.exp_fma, (-0.0,), 1.0), (E.exp2_fma, (-INF,), 0.0),
    (E.exp2_fma, (NAN,), NAN), (E.exp2, (-INF,), 0.0), (E.expm1, (-0.0,), -0.0), (E.expm1, (-INF,), -1.0),
    (E.expm1, (INF,), INF), (E.log, (0.0,), -INF), (E.log, (-0.0,), -INF), (E.log, (-1.0,), NAN),
    (E.log, (INF,), INF), (E.log, (1.0,), 0.0), (E.log2, (0.0,), -INF), (E.log10, (-INF,), NAN),
    (E.log1p, (-0.0,), -0.0), (E.log1p, (-1.0,), -INF), (E.log1p, (-2.0,), NAN), (E.log1p, (INF,), INF),
    (T.sin, (-0.0,), -0.0), (T.sin, (INF,), NAN), (T.cos, (NAN,), NAN), (T.cos, (0.0,), 1.0),
    (T.tan, (-0.0,), -0.0), (T.atan, (-0.0,), -0.0), (T.atan, (INF,), np.pi / 2), (T.atan, (-INF,), -np.pi / 2),
    (S.tanh, (-0.0,), -0.0), (S.tanh, (INF,), 1.0), (S.tanh, (-INF,), -1.0), (S.tanh, (NAN,), NAN),
    (S.erf, (-0.0,), -0.0), (S.erf, (INF,), 1.0), (S.erf, (-INF,), -1.0), (S.erf, (NAN,), NAN),
    (S.cbrt, (-0.0,), -0.0), (S.cbrt, (-INF,), -INF), (S.cbrt, (-8.0,), -2.0), (S.cbrt, (NAN,), NAN),
    (S.rsqrt, (0.0,), INF), (S.rsqrt, (-0.0,), -INF), (S.rsqrt, (INF,), 0.0), (S.rsqrt, (-1.0,), NAN),
    (T.atan2, (0.0, 0.0), 0.0), (T.atan2, (-0.0, 0.0), -0.0), (T.atan2, (0.0, -0.0), np.pi),
    (T.atan2, (-0.0, -0.0), -np.pi), (T.atan2, (INF, INF), np.pi / 4), (T.atan2, (-INF, -INF), -3 * np.pi / 4),
    (T.atan2, (1.0, -INF), np.pi), (T.atan2, (NAN, 1.0), NAN), (T.atan2, (1.0, 0.0), np.pi / 2),
    (E.powf, (NAN, 0.0), 1.0), (E.powf, (1.0, NAN), 1.0), (E.powf, (-1.0, INF), 1.0), (E.powf, (-8.0, 1 / 3), NAN),
    (E.powf, (-0.0, -3.0), -INF), (E.powf, (0.0, -2.0), INF), (E.powf, (-0.0, 3.0), -0.0), (E.powf, (-0.0, 2.0), 0.0),
    (E.powf, (0.5, -INF), INF), (E.powf, (2.0, -INF), 0.0), (E.powf, (0.5, INF), 0.0), (E.powf, (2.0, INF), INF),
    (E.powf, (-INF, -3.0), -0.0), (E.powf, (-INF, 3.0), -INF), (E.powf, (-INF, 2.0), INF), (E.powf, (INF, -1.0), 0.0),
    (E.powf, (-2.0, 3.0), -8.0), (E.powf, (-2.0, -2.0), 0.25), (E.powf, (4.0, 0.5), 2.0), (E.powf, (NAN, 1.0), NAN),
    (E.powf, (10.0, 400.0), INF), (E.powf, (10.0, -400.0), 0.0),
]


@pytest.mark.parametrize("fmt", [F32, F64], ids=str)
def test_special_values(fmt):
    dtype = np.float32 if fmt == F32 else np.float64
    for fn, args, expected in SPECIALS:
        got = evaluate(fn, fmt, *(np.array([a], dtype) for a in args))[0]
        want = np.array(expected, dtype)
        ok = np.isnan(want) and np.isnan(got) or (got == want and np.signbit(got) == np.signbit(want))
        assert ok, f"{fn.__name__}{args} in {fmt}: got {got!r}, want {want!r}"


@pytest.mark.parametrize("fmt", [F32, F64], ids=str)
def test_subnormal_and_overflow_edges(fmt):
    dtype = np.float32 if fmt == F32 else np.float64
    fi = np.finfo(dtype)
    tiny = np.array([fi.smallest_subnormal, fi.smallest_subnormal * 3, fi.tiny / 2, fi.tiny], dtype)
    # exp into the subnormal range and log of subnormals are still accurate
    _check("exp", E.exp, np.exp, fmt, 1, np.log(tiny.astype(np.float64)).astype(dtype))
    _check("log", E.log, np.log, fmt, 1, tiny)
    _check("cbrt", S.cbrt, np.cbrt, fmt, 1, tiny)
    edge = np.array([np.log(fi.max), np.nextafter(np.log(fi.max), 0)], np.float64).astype(dtype)
    _check("exp", E.exp, np.exp, fmt, 1, edge)


def test_f64_trig_reduces_exactly_at_any_magnitude():
    """XLA:CPU's f64 sin/cos/tan (libm) at huge arguments, where Cody-Waite alone gave sin(1.8e308) =
    -1.3e274 and sin(2^63) = -0.84; and the f64 value closest to a multiple of pi/2 (|r| ~ 2^-61)."""
    x = np.array([1.7976931348623157e308, 9.223372036854776e18, -9.223372036854776e18])
    xla = {T.sin: [0.004961954789184062, 0.9999303766734422, -0.9999303766734422],
           T.cos: [-0.9999876894265599, 0.011800076512800236, 0.011800076512800236],
           T.tan: [-0.004962015874444895, 84.73931296875567, -84.73931296875567]}
    for fn, expected in xla.items():
        assert np.all(_ulp_error(evaluate(fn, F64, x), np.array(expected)) <= 2), fn.__name__
    hard = np.array([6381956970095103 * 2.0**797])
    assert _ulp_error(evaluate(T.sin, F64, hard), np.sin(hard.astype(L)))[0] <= 1


def test_f64_sin_cos_without_full_range_stay_bounded():
    """The complex functions' reduction (Cody-Waite alone) is not accurate past 2^33 * pi/2, but
    its sin and cos stay in [-1, 1] (an unclamped low part once gave -1.3e274)."""
    x = np.array([1.7976931348623157e308, -1e300, 9.223372036854776e18, 1e30, 2.0**60, 1.5e10])
    sin, cos = evaluate(lambda b, v: T.sin_cos(b, v, full_range=False)[0], F64, x), \
        evaluate(lambda b, v: T.sin_cos(b, v, full_range=False)[1], F64, x)
    assert np.all(np.abs(sin) <= 1.0) and np.all(np.abs(cos) <= 1.0)
