"""Cumulative sums and products (jnp.cumsum, lax.cumsum(reverse=True), jnp.cumprod) and narrow
float window sums give XLA:CPU's bits: a long float scan is XLA's two-level scan of blocks of 16
(passes/reduce_window_rewriter.py), and a window folds in its own type (passes/
narrow_float_reductions.py). A single running sum of 65,537 f32 values was ~20x farther from the
exact sums than XLA's."""

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="the reference is jax.jit on XLA:CPU")
jnp = jax.numpy
lax = jax.lax

import hlocc.jax  # noqa: E402

RNG = np.random.default_rng(5)

BOTH = ((np.float32, (2, 4099)), (jnp.bfloat16, (3, 1000)))
PROGRAMS = {
    "cumsum": (lambda x: jnp.cumsum(x, axis=-1), BOTH),
    "cumsum_axis0": (lambda x: jnp.cumsum(x, axis=0), BOTH),
    # (the reverse scan is the same two-level rewrite of a reversed window: ~10 s of compiles on two
    # loaded cores, in the slow set; cumsum and cumprod check the rewrite by default)
    "reverse_cumsum": (lambda x: lax.cumsum(x, axis=1, reverse=True), BOTH),
    "cumprod": (lambda x: jnp.cumprod(1 + x / 64, axis=-1), BOTH),
    # (an f32 window of 64 is summed in another order by XLA's vectorized loop: within an ulp)
    "window_sum": (lambda x: lax.reduce_window(x, jnp.zeros((), x.dtype), lax.add, (1, 64), (1, 64), "VALID"),
                   BOTH[1:]),
}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n == "reverse_cumsum" else n
                                  for n in PROGRAMS])
def test_scans_are_xla_cpus_bit_for_bit(name):
    f, cases = PROGRAMS[name]
    for dtype, shape in cases:
        x = (RNG.standard_normal(shape) + 1).astype(dtype)
        got, want = np.asarray(hlocc.jax.jit(f)(x)), np.asarray(jax.jit(f)(x))
        np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32), err_msg=str(dtype))


def test_a_long_sum_is_as_close_to_exact_as_xlas():
    x = RNG.standard_normal((1, 65537)).astype(np.float32)
    exact = np.cumsum(x.astype(np.float64), axis=1)
    got = hlocc.jax.jit(lambda v: jnp.cumsum(v, axis=1))(x)
    assert np.abs(got - exact).max() < 5e-4  # one running sum: 2.4e-3; XLA's blocks: 1.1e-4
