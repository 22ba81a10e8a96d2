"""The bound BLAS gemm (runtime/blas.py): MKL's `sgemm_`/`dgemm_` from torch's libtorch_cpu, on
every transposition of operands and output against numpy, the views it refuses, and the runtime's
gemm thunks (random dimension numbers and layouts) with it bound, against the reference evaluator.
The gemm thunks a static program runs as BLAS kernel thunks (runtime/blas_gemm.py), through its
call plan, on every hand-picked dot and layout. Skipped without torch (the library it binds)."""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest
from test_library import DOT_CASES, _operands, check_gemm, dot_module, random_dot_case

import hlocc
from hlocc.evaluator import Evaluator
from hlocc.hlo.parser import parse_hlo
from hlocc.runtime import blas, library
from hlocc.runtime.blas_gemm import with_blas_gemms
from hlocc.runtime.thunks import GemmThunk, KernelThunk


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def _view(rng, dims, dtype, transposed: bool) -> np.ndarray:
    """A [rows, cols] operand stored row-major, or column-major (its transpose's storage)."""
    storage = rng.standard_normal(dims[::-1] if transposed else dims).astype(dtype)
    return storage.T if transposed else storage


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mkn", [(16, 64, 128), (5, 7, 2), (1, 4, 3), (6, 1, 5), (1, 1, 1), (3, 4, 1)],
                         ids=lambda d: "x".join(map(str, d)))
def test_gemm_layout_every_transposition(mkl, dtype, mkn):
    m, k, n = mkn
    rng = np.random.default_rng(m * 100 + k * 10 + n)
    for ta, tw, to in itertools.product([False, True], repeat=3):
        a, w = _view(rng, (m, k), dtype, ta), _view(rng, (k, n), dtype, tw)
        out = _view(rng, (m, n), dtype, to)
        out[...] = np.nan
        layout = blas.gemm_layout(a, w, out)
        assert layout is not None, (ta, tw, to)
        layout.run(_address(a), _address(w), _address(out))
        np.testing.assert_allclose(out, a @ w, rtol=1e-5, atol=1e-5, err_msg=str((ta, tw, to)))


def test_gemm_layout_strided_rows_write_only_the_view(mkl):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((6, 9)).astype(np.float32)[::2, 1:5]  # rows of stride 9, contiguous columns
    w = rng.standard_normal((4, 5)).astype(np.float32)
    storage = np.full((5, 8), np.nan, np.float32)
    out = storage[1:4, 2:7]
    layout = blas.gemm_layout(a, w, out)
    layout.run(_address(a), _address(w), _address(out))
    np.testing.assert_allclose(out, a @ w, rtol=1e-5)
    untouched = np.ones_like(storage, bool)
    untouched[1:4, 2:7] = False
    assert np.isnan(storage[untouched]).all(), "the gemm wrote outside its output view"


def test_gemm_layout_refuses_what_blas_cannot_take(mkl):
    rng = np.random.default_rng(2)
    a, w = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((4, 5)).astype(np.float32)
    out = np.empty((3, 5), np.float32)
    assert blas.gemm_layout(a.astype(np.float16), w, out) is None  # mixed dtypes
    assert blas.gemm_layout(a[None], w[None], out[None]) is None  # batched: numpy's matmul
    strided = rng.standard_normal((6, 16)).astype(np.float32)[::2, ::2]  # [3, 8], no unit stride
    assert blas.gemm_layout(strided[:, :4], w, out) is None
    assert blas.gemm_layout(a.astype(np.int32), w.astype(np.int32), out.astype(np.int32)) is None


@pytest.mark.parametrize("seed", range(12))
def test_gemm_thunks_with_mkl(mkl, seed):
    """The runtime's gemms (random dimension numbers and layouts, f32) with MKL bound."""
    rng = np.random.default_rng(seed)
    case, layouts = random_dot_case(rng)
    dtypes = (np.float32,) * 3
    check_gemm(dot_module(*case, dtypes=dtypes, layouts=layouts), *_operands(case, dtypes, seed))


def test_a_matrix_product_thunk_calls_blas(mkl, monkeypatch):
    monkeypatch.setenv("HLOCC_NATIVE_CALL", "0")  # the gemm thunk's path, not a native call's BLAS kernel
    library._GEMM_CALLS.clear()
    case = ((16, 64), (32, 64), (1,), (1,), (), ())  # a Linear layer: x @ wᵀ
    check_gemm(dot_module(*case), *_operands(case, (np.float32,) * 3))
    assert [c.blas is not None for c in library._GEMM_CALLS.values()] == [True]


MATMULS = ("matmul", "matmul_transposed_lhs", "matmul_transposed_rhs")
COLUMN_MAJOR = (0, 1)  # minor_to_major of a 2-D column-major buffer
PROGRAMS = [(name, (None, None, None)) for name in sorted(DOT_CASES)] + [
    (name, layouts) for name in MATMULS for layouts in ((COLUMN_MAJOR,) * 3, (None, COLUMN_MAJOR, COLUMN_MAJOR))]


@pytest.mark.parametrize("name, layouts", PROGRAMS, ids=[f"{n}-{'-'.join(map(str, lay))}" for n, lay in PROGRAMS])
def test_programs_with_blas_gemm_kernels(mkl, name, layouts):
    """The program's gemm thunks as BLAS kernel thunks where BLAS takes them (2-D f32 products),
    GemmThunks elsewhere; the results the evaluator's, on a fresh and a reused arena."""
    case = DOT_CASES[name]
    text = dot_module(*case, layouts=layouts)
    exe = hlocc.compile(text, "cpu", gemm="library")
    runner = exe.runner
    runner.program = with_blas_gemms(runner.program)
    lhs, rhs = _operands(case, (np.float32,) * 3)
    expected = Evaluator().run(parse_hlo(text), [lhs, rhs])
    for _ in range(2):  # the plan's arena is reused by the second call
        got = exe(lhs, rhs)
        np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-5, atol=1e-5)
    gemms = [t for t in runner.program.thunks if isinstance(t, GemmThunk) or t.kind == "kernel" and t.emitter == "blas"]
    if name in MATMULS:
        assert [type(t) for t in gemms] == [KernelThunk]
    elif np.prod([case[0][d] for d in case[4]]) > 1:  # batched: numpy's
        assert [type(t) for t in gemms] == [GemmThunk]


@pytest.mark.parametrize("dtype, np_dtype", [("f8e5m2", ml_dtypes.float8_e5m2), ("f8e4m3fn", ml_dtypes.float8_e4m3fn),
                                             ("bf16", ml_dtypes.bfloat16)])
def test_narrow_float_dots_with_blas_bound(mkl, dtype, np_dtype):
    """A dot of narrow floats is no BLAS kernel, but deciding so builds strided views of its buffers:
    those must not go through numpy's typestr, which float8_e5m2's ('<f1') does not survive."""
    text = f"""HloModule m
ENTRY e {{
  a = {dtype}[2,3] parameter(0)
  b = {dtype}[3,2] parameter(1)
  ROOT d = f32[2,2] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}"""
    a = np.arange(6).reshape(2, 3).astype(np_dtype)
    b = np.arange(6).reshape(3, 2).astype(np_dtype)
    np.testing.assert_array_equal(np.asarray(hlocc.compile(text, "cpu")(a, b)), [[10, 13], [28, 40]])
