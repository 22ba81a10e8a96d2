"""runtime/small_gemm.py: the packed few-rows kernel against float64 products (every row-block
size, a partial last panel, k of 1), and a dynamic program's gemm by a constant taking it at the
row counts it is for and BLAS at the others."""

import numpy as np
import pytest

import hlocc
from hlocc.runtime import library, small_gemm


def _reference(a, w):
    return (a.astype(np.float64) @ w.astype(np.float64)).astype(np.float32)


@pytest.mark.parametrize("m", [1, 2, 5, small_gemm.ROWS, small_gemm.ROWS + 1, 13, small_gemm.MAX_ROWS])
@pytest.mark.parametrize("k, n", [(1, 64), (37, 70), (64, 129), (5, 3)])
def test_packed_kernel_matches_the_product(m, k, n):
    rng = np.random.default_rng(m * 1000 + k + n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((k, n)).astype(np.float32)
    packed = small_gemm.pack(w)
    assert packed.shape == (-(-n // small_gemm.PANEL), k, small_gemm.PANEL)
    buffer = np.full(m * n + small_gemm.PANEL, np.nan, np.float32)  # past m × n: a partial panel's stores are masked
    small_gemm.run_addresses(m, k, n, a.ctypes.data, packed.ctypes.data, packed.shape[0], buffer.ctypes.data)
    np.testing.assert_allclose(buffer[:m * n].reshape(m, n), _reference(a, w), rtol=1e-5, atol=1e-5 * np.sqrt(k))
    assert np.isnan(buffer[m * n:]).all()


def _dot_module(k: int, n: int, w: np.ndarray, transposed: bool) -> str:
    """f32[?b,k] @ a constant (given as [n, k] and contracted on its dim 1 where `transposed`)."""
    values = w.T if transposed else w
    literal = "{" + ", ".join("{" + ", ".join(f"{v!r}" for v in row) + "}" for row in values.tolist()) + "}"
    w_shape = f"f32[{n},{k}]" if transposed else f"f32[{k},{n}]"
    return (f"HloModule m\nENTRY e {{\n  p = f32[?b,{k}] parameter(0)\n  w = {w_shape} constant({literal})\n"
            f"  ROOT d = f32[?b,{n}] dot(p, w), lhs_contracting_dims={{1}}, "
            f"rhs_contracting_dims={{{1 if transposed else 0}}}\n}}\n")


@pytest.mark.parametrize("transposed", [False, True])
def test_dynamic_gemm_by_a_constant_runs_packed_at_few_rows(monkeypatch, transposed):
    monkeypatch.setattr(small_gemm, "MIN_WEIGHT_BYTES", 0)  # a small constant stands in for weights
    k, n = 24, 70
    rng = np.random.default_rng(1)
    w = rng.standard_normal((k, n)).astype(np.float32)
    exe = hlocc.compile(_dot_module(k, n, w, transposed), "cpu", gemm="library")
    for b in [0, 1, 2, small_gemm.ROWS + 1, small_gemm.MAX_ROWS, small_gemm.MAX_ROWS + 1, 3, 1]:
        x = rng.standard_normal((b, k)).astype(np.float32)
        np.testing.assert_allclose(exe(x), _reference(x, w), rtol=1e-5, atol=1e-5)
        calls = exe.program._bound[((b, k),)].calls
        packed = [s for s in calls.launches if isinstance(getattr(s, "__self__", None), library.PackedGemm)]
        assert len(packed) == (2 <= b <= small_gemm.MAX_ROWS), b
