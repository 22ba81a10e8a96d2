"""Edge values where hlocc differed from XLA:CPU, kept with XLA:CPU's own outputs (jax 0.10.2,
recorded by running the same HLO text through jaxlib) as the expected values: each module runs on
the cpu kernels and the evaluator. docs/architecture.md ("Edge values against XLA:CPU") lists the
hunt and what it left as it is (denormal flushing, ±0 in max/min, NaN in large max reduces)."""

from __future__ import annotations

import numpy as np
import pytest

import hlocc

BACKENDS = ("cpu", "interpreter")


def _run(text: str, args: list[np.ndarray], backend: str) -> np.ndarray:
    return np.asarray(hlocc.compile(text, backend=backend)(*args))


@pytest.mark.parametrize("backend", BACKENDS)
def test_integer_power_uses_the_exponents_low_six_bits(backend):
    """XLA:CPU squares over the exponent's low 6 bits (3^64 = 1, 2^65 = 2) and gives ±1 for base -1
    under a negative exponent; u8 exponents >= 128 count as negative (3^128 = 0)."""
    text = """HloModule p
ENTRY e {
  a = s32[9] parameter(0)
  b = s32[9] parameter(1)
  c = u8[9] parameter(2)
  d = u8[9] parameter(3)
  s = s32[9] power(a, b)
  u = u8[9] power(c, d)
  ROOT r = (s32[9], u8[9]) tuple(s, u)
}"""
    a = np.array([3, 2, 2, -1, -1, -1, 1, 2, 0], np.int32)
    b = np.array([64, 65, 66, -1, -2, -101, -100, -1, -2], np.int32)
    c = np.array([3, 255, 255, 3, 1, 2, 3, 0, 1], np.uint8)
    d = np.array([128, 255, 254, 66, 200, 65, 5, 200, 128], np.uint8)
    s, u = hlocc.compile(text, backend=backend)(a, b, c, d)
    np.testing.assert_array_equal(s, [1, 2, 4, -1, 1, -1, 1, 0, 0])
    np.testing.assert_array_equal(u, [0, 255, 1, 9, 1, 2, 243, 0, 1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_f64_trig_of_huge_arguments(backend):
    """f64 sin/cos/tan reduce exactly at any magnitude, as XLA:CPU's libm calls do (Cody-Waite alone
    gave sin(2^63) = -0.84 and sin(1.8e308) = -1.3e274)."""
    text = """HloModule t
ENTRY e {
  x = f64[3] parameter(0)
  s = f64[3] sine(x)
  c = f64[3] cosine(x)
  t = f64[3] tan(x)
  ROOT r = (f64[3], f64[3], f64[3]) tuple(s, c, t)
}"""
    x = np.array([1.7976931348623157e308, 9.223372036854776e18, 1e30])
    got = hlocc.compile(text, backend=backend)(x)
    xla = ([0.004961954789184062, 0.9999303766734422, 0.009331468931175825],
           [-0.9999876894265599, 0.011800076512800236, -0.9999564608959665],
           [-0.004962015874444895, 84.73931296875567, -0.009331875232662408])
    for g, expected in zip(got, xla, strict=True):
        np.testing.assert_allclose(g, expected, rtol=1e-15)


@pytest.mark.parametrize("backend", BACKENDS)
def test_reduce_precision_keeps_nan_without_mantissa(backend):
    """NaN stays the same NaN with mantissa_bits=0 (hlocc made it +inf); 3.0 rounds to 2.0 (a tie,
    to the even exponent)."""
    text = """HloModule rp
ENTRY e {
  x = f32[5] parameter(0)
  ROOT r = f32[5] reduce-precision(x), exponent_bits=8, mantissa_bits=0
}"""
    x = np.array([0x7FC00000, 0xFFC00000, 0x7FC00001, 0x40400000, 0x7F800000], np.uint32).view(np.float32)
    got = _run(text, [x], backend)
    np.testing.assert_array_equal(got.view(np.uint32), [0x7FC00000, 0xFFC00000, 0x7FC00001, 0x40000000, 0x7F800000])


@pytest.mark.parametrize("backend", BACKENDS)
def test_clamp_orders_negative_zero_below_positive_zero(backend):
    """clamp is min(max(x, lo), hi) with IEEE 754-2019's maximum and minimum: -0 < +0."""
    text = """HloModule c
ENTRY e {
  lo = f32[4] parameter(0)
  x = f32[4] parameter(1)
  hi = f32[4] parameter(2)
  ROOT r = f32[4] clamp(lo, x, hi)
}"""
    lo = np.array([-1, 0, -1, 0], np.float32)
    x = np.array([-0.0, -0.0, 0.0, np.nan], np.float32)
    hi = np.array([0, 1, -0.0, 1], np.float32)
    got = _run(text, [lo, x, hi], backend)
    np.testing.assert_array_equal(np.signbit(got[:3]), [True, False, True])
    np.testing.assert_array_equal(got[:3], [0, 0, 0])
    assert np.isnan(got[3])


@pytest.mark.parametrize("backend", BACKENDS)
def test_complex_functions_without_annex_g_infinities(backend):
    """XLA:CPU: abs, sqrt and log of a number with a NaN part are NaN (C99: abs(NaN + inf i) = inf),
    and sqrt reads a -0 imaginary part as +0 (sqrt(-1 - 0i) = +i; C99: -i)."""
    text = """HloModule z
ENTRY e {
  z = c64[3] parameter(0)
  a = f32[3] abs(z)
  s = c64[3] sqrt(z)
  l = c64[3] log(z)
  ROOT r = (f32[3], c64[3], c64[3]) tuple(a, s, l)
}"""
    z = np.array([np.nan, np.inf, -1.0, -0.0, 4.0, 0.0], np.float32).view(np.complex64)  # NaN+inf i, -1-0i, 4+0i
    a, s, lg = hlocc.compile(text, backend=backend)(z)
    assert np.isnan(a[0]) and a[1] == 1 and a[2] == 4
    assert np.isnan(s[0].real) and np.isnan(s[0].imag) and np.isnan(lg[0].real) and np.isnan(lg[0].imag)
    np.testing.assert_array_equal(s[1:], np.array([1j, 2], np.complex64))
    assert not np.signbit(s[1].real) and not np.signbit(s[1].imag)


@pytest.mark.parametrize("backend", BACKENDS)
def test_complex_sign_divides_each_part(backend):
    """XLA:CPU's sign(z): each part divided by |z| (sign(1e30) = 1 exactly, sign(inf + 0i) = NaN + 0i)
    and z itself for 0 (sign(-0 + 0i) = -0 + 0i)."""
    text = """HloModule s
ENTRY e {
  z = c128[3] parameter(0)
  ROOT r = c128[3] sign(z)
}"""
    z = np.array([1e30, 0.0, np.inf, 0.0, -0.0, 0.0]).view(np.complex128)
    got = _run(text, [z], backend)
    assert got[0] == 1 and np.isnan(got[1].real) and got[1].imag == 0
    assert got[2] == 0 and np.signbit(got[2].real) and not np.signbit(got[2].imag)
