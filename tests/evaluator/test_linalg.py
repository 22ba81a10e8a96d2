"""cholesky, triangular-solve, fft and batch-norm in the reference evaluator."""

from __future__ import annotations

import numpy as np
import pytest
from _compute_helpers import assert_same_bits, run, run_jax


def spd(rng, batch, n, dtype=np.float32):
    a = rng.standard_normal(batch + (n, n))
    return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n)).astype(dtype)


@pytest.mark.parametrize("lower", [True, False])
def test_cholesky_factorises_and_zeroes_other_triangle(lower):
    a = spd(np.random.default_rng(13), (2,), 4).astype(np.float64)
    a_garbage = a.copy()
    # Only one triangle is read: garbage in the other must not matter.
    if lower:
        a_garbage[..., np.triu_indices(4, 1)[0], np.triu_indices(4, 1)[1]] = 99.0
    else:
        a_garbage[..., np.tril_indices(4, -1)[0], np.tril_indices(4, -1)[1]] = 99.0
    text = f"""
ENTRY e {{
  a = f64[2,4,4] parameter(0)
  ROOT c = f64[2,4,4] cholesky(a), lower={'true' if lower else 'false'}
}}"""
    out = run(text, a_garbage)
    ref = np.linalg.cholesky(a)
    expected = ref if lower else np.swapaxes(ref, -1, -2)
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)


def test_cholesky_not_positive_definite_gives_nan_matrix():
    a = np.array([[[4, 0], [0, 9]], [[1, 2], [2, 1]]], np.float32)
    text = """
ENTRY e {
  a = f32[2,2,2] parameter(0)
  ROOT c = f32[2,2,2] cholesky(a), lower=true
}"""
    out = run(text, a)
    assert_same_bits(out[0], np.array([[2, 0], [0, 3]], np.float32))
    assert np.isnan(out[1]).all()


def test_cholesky_matches_jax():
    # JAX lowers cholesky to a LAPACK custom-call on CPU, so compare values, not lowered HLO.
    pytest.importorskip("jax")
    from jax import lax

    a = spd(np.random.default_rng(14), (3,), 5)
    text = """
ENTRY e {
  a = f32[3,5,5] parameter(0)
  ROOT c = f32[3,5,5] cholesky(a), lower=true
}"""
    expected = np.asarray(lax.linalg.cholesky(a, symmetrize_input=False))
    np.testing.assert_allclose(run(text, a), np.tril(expected), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("left_side", [True, False])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("transpose_a", [False, True])
@pytest.mark.parametrize("unit_diagonal", [False, True])
def test_triangular_solve_matches_jax(left_side, lower, transpose_a, unit_diagonal):
    pytest.importorskip("jax")
    from jax import lax

    rng = np.random.default_rng(15)
    a = (rng.standard_normal((2, 4, 4)) + 4 * np.eye(4)).astype(np.float32)
    b_shape = (2, 4, 3) if left_side else (2, 3, 4)
    b = rng.standard_normal(b_shape).astype(np.float32)
    flag = {True: "true", False: "false"}
    b_type = "f32[" + ",".join(map(str, b_shape)) + "]"
    attrs = (f"left_side={flag[left_side]}, lower={flag[lower]}, unit_diagonal={flag[unit_diagonal]}, "
             f"transpose_a={'TRANSPOSE' if transpose_a else 'NO_TRANSPOSE'}")
    text = f"""
ENTRY e {{
  a = f32[2,4,4] parameter(0)
  b = {b_type} parameter(1)
  ROOT x = {b_type} triangular-solve(a, b), {attrs}
}}"""
    expected = np.asarray(lax.linalg.triangular_solve(a, b, left_side=left_side, lower=lower,
                                                      transpose_a=transpose_a, unit_diagonal=unit_diagonal))
    np.testing.assert_allclose(run(text, a, b), expected, rtol=1e-4, atol=1e-4)


def test_triangular_solve_adjoint_complex():
    rng = np.random.default_rng(16)
    a = (rng.standard_normal((3, 3)) + 1j * rng.standard_normal((3, 3)) + 3 * np.eye(3)).astype(np.complex128)
    b = (rng.standard_normal((3, 2)) + 1j * rng.standard_normal((3, 2))).astype(np.complex128)
    text = """
ENTRY e {
  a = c128[3,3] parameter(0)
  b = c128[3,2] parameter(1)
  ROOT x = c128[3,2] triangular-solve(a, b), left_side=true, lower=true, transpose_a=ADJOINT
}"""
    x = run(text, a, b)
    np.testing.assert_allclose(np.conj(np.tril(a)).T @ x, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kind", ["fft", "ifft", "rfft", "irfft", "fft2", "irfft2"])
def test_fft_matches_jax(kind):
    jnp = pytest.importorskip("jax.numpy")
    rng = np.random.default_rng(17)
    real = rng.standard_normal((3, 4, 8)).astype(np.float32)
    cplx = (real + 1j * rng.standard_normal((3, 4, 8))).astype(np.complex64)
    fn, arg = {
        "fft": (jnp.fft.fft, cplx), "ifft": (jnp.fft.ifft, cplx), "rfft": (jnp.fft.rfft, real),
        "irfft": (lambda x: jnp.fft.irfft(x, n=14), cplx), "fft2": (jnp.fft.fft2, cplx),
        "irfft2": (lambda x: jnp.fft.irfftn(x, s=(4, 14), axes=(1, 2)), cplx),
    }[kind]
    ours, theirs = run_jax(fn, arg)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4)


def bn_reference(x, feature, eps):
    axes = tuple(d for d in range(x.ndim) if d != feature)
    return x.mean(axis=axes), x.var(axis=axes)


def test_batch_norm_training_and_inference():
    rng = np.random.default_rng(18)
    x = rng.standard_normal((4, 3, 5)).astype(np.float32)
    scale = rng.standard_normal(3).astype(np.float32)
    offset = rng.standard_normal(3).astype(np.float32)
    text = """
ENTRY e {
  x = f32[4,3,5] parameter(0)
  s = f32[3] parameter(1)
  o = f32[3] parameter(2)
  ROOT t = (f32[4,3,5], f32[3], f32[3]) batch-norm-training(x, s, o), epsilon=0.001, feature_index=1
}"""
    out, mean, var = run(text, x, scale, offset)
    m, v = bn_reference(x.astype(np.float64), 1, 1e-3)
    np.testing.assert_allclose(mean, m, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(var, v, rtol=1e-5, atol=1e-6)
    shape = (1, 3, 1)
    expected = (x - m.reshape(shape)) / np.sqrt(v.reshape(shape) + 1e-3) * scale.reshape(shape) + offset.reshape(shape)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)

    inference = """
ENTRY e {
  x = f32[4,3,5] parameter(0)
  s = f32[3] parameter(1)
  o = f32[3] parameter(2)
  m = f32[3] parameter(3)
  v = f32[3] parameter(4)
  ROOT y = f32[4,3,5] batch-norm-inference(x, s, o, m, v), epsilon=0.001, feature_index=1
}"""
    np.testing.assert_allclose(run(inference, x, scale, offset, mean, var), expected, rtol=1e-5, atol=1e-5)


def test_batch_norm_grad_matches_jax_autodiff():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    rng = np.random.default_rng(19)
    x = rng.standard_normal((6, 4)).astype(np.float32)
    scale = rng.standard_normal(4).astype(np.float32)
    dy = rng.standard_normal((6, 4)).astype(np.float32)
    eps = 0.01
    mean, var = x.mean(axis=0), x.var(axis=0)

    def normalize(x, scale, offset):  # batch statistics, as batch-norm-training computes them
        mu = jnp.mean(x, axis=0)
        v = jnp.mean((x - mu) ** 2, axis=0)
        return (x - mu) / jnp.sqrt(v + eps) * scale + offset

    _, vjp = jax.vjp(normalize, x, scale, np.zeros(4, np.float32))
    gx, gs, go = (np.asarray(g) for g in vjp(dy))
    text = """
ENTRY e {
  x = f32[6,4] parameter(0)
  s = f32[4] parameter(1)
  m = f32[4] parameter(2)
  v = f32[4] parameter(3)
  dy = f32[6,4] parameter(4)
  ROOT g = (f32[6,4], f32[4], f32[4]) batch-norm-grad(x, s, m, v, dy), epsilon=0.01, feature_index=1
}"""
    ours = run(text, x, scale, mean, var, dy)
    for o, t in zip(ours, (gx, gs, go)):
        np.testing.assert_allclose(o, t, rtol=1e-4, atol=1e-4)
