"""Shared helpers of the compute-op evaluator tests: run HLO text, lower JAX functions to HLO."""

from __future__ import annotations

import numpy as np

from hlocc.evaluator import Evaluator
from hlocc.hlo.parser import parse_hlo

# Scalar combiners, by name, for HLO text in the tests.
COMBINERS = """
add_f32 { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b) }
max_f32 { a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] maximum(a, b) }
add_s32 { a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT r = s32[] add(a, b) }
"""


def run(text: str, *args, seed: int = 0):
    """Evaluate the module in `text` on numpy `args`."""
    return Evaluator(seed).run(parse_hlo(text), list(args))


def run_jax(fn, *args):
    """Lower `fn` with JAX, evaluate its HLO with hlocc; returns (hlocc result, jax result)."""
    import jax

    lowered = jax.jit(fn).lower(*args)
    ours = run(lowered.as_text(dialect="hlo"), *args)
    theirs = jax.jit(fn)(*args)
    if isinstance(theirs, (tuple, list)):
        return ours, tuple(np.asarray(t) for t in theirs)
    return ours, np.asarray(theirs)


def assert_same_bits(actual, expected):
    """Exact equality including dtype, NaN bit patterns and the sign of zero."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert actual.tobytes() == expected.tobytes(), f"\n{actual}\n!=\n{expected}"
