"""Shared helpers of the pass tests: inputs full of special values, and the before/after comparison
(bitwise for integers and pred, equal-or-both-NaN for floating point)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from hlocc.cli import flatten
from hlocc.evaluator import Evaluator
from hlocc.hlo.ir import HloModule
from hlocc.hlo.types import Shape, from_dtype

FLOAT_SPECIALS = (0.0, -0.0, 1.0, -1.0, np.nan, np.inf, -np.inf, 2.5, -3.75, 1e-30, 65504.0, 0.5)


def special_value(shape: Shape, rng: np.random.Generator):
    """An argument for `shape` mixing special values (±0.0, ±inf, NaN, integer extremes) with
    random ones; integer arrays meant as indices still get some small values."""
    if shape.is_tuple:
        return tuple(special_value(s, rng) for s in shape.tuple_shapes)
    if shape.is_token:
        return None
    et, dims = shape.element_type, shape.dims
    n = int(np.prod(dims, dtype=np.int64))
    if et.is_pred:
        return rng.random(dims) < 0.5
    if et.is_integer:
        info = ml_dtypes.iinfo(shape.dtype)
        pool = np.array([0, 1, -1 if et.is_signed else 2, int(info.min), int(info.max), 2, 3], dtype=shape.dtype)
        small = rng.integers(0, 4, n).astype(shape.dtype)
        return np.where(rng.random(n) < 0.5, rng.choice(pool, n), small).reshape(dims)
    specials = np.array(FLOAT_SPECIALS)
    values = np.where(rng.random(n) < 0.5, rng.choice(specials, n), rng.standard_normal(n))
    if et.is_complex:  # (1j * inf would put a NaN in the real part)
        imag = np.where(rng.random(n) < 0.5, rng.choice(specials, n), rng.standard_normal(n))
        values = values.astype(np.complex128)
        values.imag = imag
    with np.errstate(all="ignore"):
        return values.astype(shape.dtype).reshape(dims)


def special_inputs(module: HloModule, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    return [special_value(p.shape, rng) for p in module.entry.parameters]


def same_values(a, b) -> str | None:
    """None when `a` and `b` agree (bitwise for integers and pred, equal or both NaN for floating
    point, real and imaginary parts separately for complex), else what differs."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return f"{a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}"
    kind = from_dtype(a.dtype)
    if kind.is_integer or kind.is_pred:
        return None if np.array_equal(a, b) else "integer values differ"
    if kind.is_complex:
        parts = [(a.real, b.real), (a.imag, b.imag)]
    else:
        parts = [(a.astype(np.float64), b.astype(np.float64))]
    for x, y in parts:
        if not np.array_equal(x, y, equal_nan=True):
            bad = np.argwhere(~((x == y) | (np.isnan(x) & np.isnan(y))))
            i = tuple(bad[0])
            return f"values differ at {list(i)}: {x[i]!r} vs {y[i]!r}"
    return None


def evaluate(module: HloModule, inputs, seed: int = 1) -> list:
    """The module's outputs (a tuple result flattened) on `inputs`."""
    return flatten(Evaluator(seed=seed, max_while_iterations=100_000).run(module, inputs))


def assert_same_results(before: HloModule, after: HloModule, inputs=None, seed: int = 0,
                        expected: list | None = None) -> None:
    """Evaluate both modules on the same inputs and require equal results (see `same_values`);
    `expected` may hold `before`'s outputs already."""
    inputs = special_inputs(before, seed) if inputs is None else inputs
    expected = evaluate(before, inputs, seed) if expected is None else expected
    got = evaluate(after, inputs, seed)
    assert len(expected) == len(got)
    for i, (x, y) in enumerate(zip(expected, got)):
        if x is None or not hasattr(x, "dtype") and not isinstance(x, np.ndarray):
            continue
        why = same_values(x, y)
        assert why is None, f"output {i}: {why}\n--- after ---\n{after.to_string()}"
