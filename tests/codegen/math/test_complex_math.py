"""expand-float-ops' complex expansions (approx_complex.py) run through the numpy builder, op for op as
the pass emits them, against numpy's complex functions (glibc's cexp, clog, csqrt, ...) on every pair of
edge values of the parts' type and random values: division (numpy's with XLA's special cases, the
evaluator's) and hypot bit for bit, the functions within
a few ulps of the result's larger part with the same special values (NaN, infinities). The f32 forms are
only checked here: kernels compute the functions of c64 numbers in c128 (test_cpu_elementwise.py
compares those with the evaluator)."""

from __future__ import annotations

import numpy as np
import pytest
from _cpu_helpers import T, complex_of, complex_ulp_distance, edge_values, mismatches

from hlocc.codegen.math import approx_complex as C
from hlocc.codegen.math.float_builder import F32, F64
from hlocc.codegen.math.float_builder_numpy import numpy_builder
from hlocc.codegen.target import cpu_target
from hlocc.evaluator import complex_math as evaluator

# expand-float-ops' sin/cos are accurate below it (test_cpu_elementwise.TRIG_HUGE); f32's everywhere
TRIG_RANGE = {"c64": np.inf, "c128": 1.35e10}
FORMATS = {"c64": F32, "c128": F64}


def _inputs(type_name: str) -> np.ndarray:
    rng = np.random.default_rng(7)
    part = T["f32" if type_name == "c64" else "f64"].dtype
    random = complex_of(rng.standard_normal(4000) * 3, rng.standard_normal(4000) * 3, type_name)
    huge = np.exp(rng.uniform(-80, 80, 4000)) * rng.choice([-1, 1], 4000)
    spread = complex_of(huge.astype(part), rng.standard_normal(4000).astype(part), type_name)
    return np.concatenate([edge_values(type_name), random, spread, complex_of(spread.imag, spread.real, type_name)])


def _run(fn, type_name: str, *zs: np.ndarray):
    b = numpy_builder()
    fmt = FORMATS[type_name]
    out = fn(b, *((b.wrap(z.real.copy(), fmt), b.wrap(z.imag.copy(), fmt)) for z in zs))
    if isinstance(out, tuple):
        return complex_of(np.asarray(out[0].raw), np.asarray(out[1].raw), type_name)
    return np.asarray(out.raw)


# function: (numpy reference, part of z whose sine/cosine is taken, ulps of the result's larger part);
# log and sqrt are the evaluator's: numpy's with XLA:CPU's NaN parts (log(NaN + inf i) = NaN + NaN i)
# and, for sqrt, a -0 imaginary part read as +0 (sqrt(-1 - 0i) = +i)
FUNCTIONS = {
    "exp": (np.exp, "imag", 3), "log": (evaluator.complex_log, None, 3), "sqrt": (evaluator.complex_sqrt, None, 2),
    "sinh": (np.sinh, "imag", 4), "cosh": (np.cosh, "imag", 4), "tanh": (np.tanh, "imag", 6),
    "sin": (np.sin, "real", 4), "cos": (np.cos, "real", 4), "tan": (np.tan, "real", 6),
}


@pytest.mark.parametrize("type_name", ["c64", "c128"])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_function_matches_the_c_library(name, type_name):
    reference, trig_part, ulps = FUNCTIONS[name]
    z = _inputs(type_name)
    if trig_part is not None:
        argument = getattr(z, trig_part)
        z = z[~(np.isfinite(argument) & (np.abs(argument) >= TRIG_RANGE[type_name]))]
    with np.errstate(all="ignore"):
        got, ref = _run(getattr(C, name), type_name, z), reference(z)
    distance = complex_ulp_distance(got, ref)
    bad = np.flatnonzero(distance > ulps)
    assert bad.size == 0, [(z[i], got[i], ref[i], distance[i]) for i in bad[:5]]


def _special_values(type_name: str) -> np.ndarray:
    """Every complex number whose parts are one of: ±0, ±1, a finite value, ±(tiny subnormal),
    ±(largest finite), ±1e30, ±inf, NaN -- each class of XLA's division cases, 256 numbers, so
    65536 pairs (all pairs of all edge values would be 39 million, 100 s of a CI run)."""
    part = T["f32" if type_name == "c64" else "f64"].dtype
    info = np.finfo(part)
    values = np.array([0.0, 1.0, 3.0, 1e30, float(info.smallest_subnormal), float(info.max), np.inf], part)
    parts = np.concatenate([values, -values, [np.nan, 0.5]]).astype(part)
    re, im = np.meshgrid(parts, parts, indexing="ij")
    return complex_of(re.reshape(-1), im.reshape(-1), type_name)


@pytest.mark.parametrize("type_name", ["c64", "c128"])
def test_division_is_the_evaluators_bit_for_bit(type_name):
    """numpy's Smith quotient with XLA's cases for zero divisors and infinite parts (the evaluator's
    `complex_divide`), on random values and edge values and every pair of special values."""
    x = _inputs(type_name)
    edges = _special_values(type_name)
    x = np.concatenate([x, np.repeat(edges, edges.size)])
    y = np.concatenate([np.random.default_rng(3).permutation(x[:-edges.size ** 2]), np.tile(edges, edges.size)])
    with np.errstate(all="ignore"):
        got, ref = _run(C.div, type_name, x, y), evaluator.complex_divide(x, y)
    assert mismatches(got, ref).size == 0


def test_hypot_is_glibcs_bit_for_bit():
    z = _inputs("c128")
    b = numpy_builder()
    with np.errstate(all="ignore"):
        got = np.asarray(C.hypot(b, b.wrap(z.real.copy(), F64), b.wrap(z.imag.copy(), F64)).raw)
        ref = np.hypot(z.real, z.imag)
    assert mismatches(got, ref).size == 0


def test_abs_of_c64_is_numpys_bit_for_bit():
    """numpy's |z| (its SIMD loop: larger * sqrt(r² + 1), a fused multiply-add on FMA hosts, which the
    numpy builder emulates exactly for f32 but in rare halfway cases), NaN where a part is NaN as
    XLA:CPU's (numpy: abs(NaN + inf i) = inf)."""
    z = _inputs("c64")
    fma = cpu_target().has_fma
    with np.errstate(all="ignore"):
        got = _run(lambda b, w: C.abs_(b, w, fma=fma), "c64", z)
    expected = np.where(np.isnan(z.real) | np.isnan(z.imag), np.float32(np.nan), np.abs(z))
    assert mismatches(got, expected).size == 0
