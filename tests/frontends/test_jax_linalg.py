"""jnp.linalg and jax.scipy.linalg programs: JAX lowers them on the CPU to LAPACK custom calls
(`lapack_<t><routine>_ffi`), which hlocc runs as library calls (evaluator/lapack.py). Each program is
compared with jax's own result from XLA:CPU in the same process; eigenvectors, whose signs and
phases are the implementation's choice, by their residual instead."""

from __future__ import annotations

import numpy as np
import pytest

import hlocc
from hlocc.cli import flatten
from hlocc.comparison import compare_arrays
from hlocc.errors import UnsupportedError

jax = pytest.importorskip("jax")
jnp = jax.numpy

RNG = np.random.default_rng(7)


def _general(shape, dtype):
    x = RNG.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * RNG.standard_normal(shape)
    return x.astype(dtype)


def _spd(n, dtype, batch=()):
    a = _general((*batch, n, n), dtype)
    return (a @ np.swapaxes(a, -1, -2).conj() + n * np.eye(n, dtype=dtype)).astype(dtype)


PROGRAMS = {
    # name: (function, arguments, LAPACK routines called)
    "cholesky_batched": (jnp.linalg.cholesky, lambda dt: [_spd(4, dt, (3,))], {"potrf"}),
    "cholesky_upper_not_pd": (lambda m: jax.scipy.linalg.cholesky(m, lower=False), lambda dt: [-_spd(3, dt)],
                              {"potrf"}),  # info > 0: JAX's NaNs
    "solve_inv_det": (lambda a, b: (jnp.linalg.solve(a, b), jnp.linalg.inv(a), jnp.linalg.det(a)),
                      lambda dt: [_general((5, 5), dt), _general((5, 2), dt)], {"getrf", "trsm"}),
    "lu_rectangular_singular": (lambda a, s: (jax.scipy.linalg.lu(a), jax.scipy.linalg.lu_factor(s)),
                                lambda dt: [_general((5, 3), dt), np.ones((3, 3), dt)], {"getrf"}),
    "triangular_solves": (lambda a, b: (jax.scipy.linalg.solve_triangular(a, b, lower=True),
                                        jax.scipy.linalg.solve_triangular(a, b, trans=1, unit_diagonal=True),
                                        jax.scipy.linalg.solve_triangular(a, b, trans="C", lower=True)),
                          lambda dt: [_general((4, 4), dt) + 4 * np.eye(4, dtype=dt), _general((4, 3), dt)], {"trsm"}),
    "qr_reduced_and_complete": (lambda a: (jnp.linalg.qr(a), jnp.linalg.qr(a.T, mode="complete")),
                                lambda dt: [_general((6, 4), dt)], {"geqrf", "orgqr"}),
    "svd_and_pinv": (lambda a: (jnp.linalg.svd(a, full_matrices=False), jnp.linalg.svd(a, compute_uv=False),
                                jnp.linalg.pinv(a)), lambda dt: [_general((2, 5, 3), dt)], {"gesdd"}),
}


@pytest.mark.parametrize("dtype", [np.float32, pytest.param(np.float64, marks=pytest.mark.slow)])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_linalg_program_matches_xla_cpu(name, dtype):
    f, make_args, routines = PROGRAMS[name]
    # The same inputs whatever ran before on this worker (xdist's order varies): SVD's singular
    # vectors are unique up to sign, and numpy's LAPACK and XLA's chose differently on some draws
    RNG.bit_generator.state = np.random.default_rng(7).bit_generator.state
    args = make_args(dtype)
    with jax.enable_x64(dtype == np.float64):
        text = jax.jit(f).lower(*args).as_text(dialect="hlo")
        expected = [np.asarray(o) for o in jax.tree_util.tree_leaves(jax.jit(f)(*args))]
    exe = hlocc.compile(text, backend="cpu")
    got = flatten(exe(*args))
    assert len(got) == len(expected)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    for i, (e, g) in enumerate(zip(expected, got)):
        assert g.dtype == e.dtype and g.shape == e.shape, (i, g.dtype, g.shape, e.dtype, e.shape)
        problem = compare_arrays(e, g, tol, tol)
        assert problem is None, f"{name} out{i}: {problem}"
    calls = {k.split()[1] for k in exe.runner.stats.library_calls if k.startswith("lapack ")}
    assert calls == routines and not exe.runner.stats.host_ops


@pytest.mark.parametrize("dtype", [np.float32, pytest.param(np.complex64, marks=pytest.mark.slow)])
def test_eigendecompositions_by_their_residual(dtype):
    """eigh and eig: eigenvalues as XLA:CPU's; eigenvectors (sign, phase: the implementation's)
    satisfy A v = w v with unit norm."""
    a, h = _general((4, 4), dtype), _spd(4, dtype)

    def f(a, h):
        return jnp.linalg.eigh(h), jnp.sort_complex(jnp.linalg.eigvals(a)), jnp.linalg.eig(a)
    text = jax.jit(f).lower(a, h).as_text(dialect="hlo")
    w_h, v_h, w_sorted, w, v = flatten(hlocc.compile(text, backend="cpu")(a, h))
    (ew_h, _), ew_sorted, _ = jax.jit(f)(a, h)
    np.testing.assert_allclose(w_h, ew_h, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(w_sorted, ew_sorted, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(h @ v_h, v_h * w_h, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(a.astype(v.dtype) @ v, v * w, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(np.linalg.norm(v, axis=0), 1, rtol=1e-5)


def test_solve_on_the_simulated_gpu():
    """The cuda backends run LAPACK calls on the host, as they do sort: library calls, not fallbacks."""
    a, b = _general((5, 5), np.float32), _general((5, 2), np.float32)
    text = jax.jit(jnp.linalg.solve).lower(a, b).as_text(dialect="hlo")
    exe = hlocc.compile(text, backend="cuda-sim")
    np.testing.assert_allclose(exe(a, b), np.asarray(jnp.linalg.solve(a, b)), rtol=1e-4, atol=1e-4)
    assert not exe.runner.stats.host_ops


def test_left_eigenvectors_are_refused_with_the_call_named():
    text = """HloModule m
ENTRY e {
  a = f32[3,3]{0,1} parameter(0)
  ROOT eig = (f32[3]{0}, f32[3]{0}, c64[3,3]{0,1}, c64[3,3]{0,1}, s32[]) custom-call(a), custom_call_target="lapack_sgeev_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={compute_left = 86 : ui8, compute_right = 78 : ui8}
}"""
    with pytest.raises(UnsupportedError, match="'eig' .*lapack_sgeev_ffi.*left eigenvectors"):
        hlocc.compile(text, backend="interpreter")(np.eye(3, dtype=np.float32))
