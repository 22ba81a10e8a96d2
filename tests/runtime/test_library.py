"""The runtime's library calls (runtime/library.py): gemm and convolution.

Through the runtime (GemmThunk / ConvolutionThunk on buffers in any layout) against the reference
evaluator, on hand-picked and seeded random dimension numbers and on every contraction dtype; and
`library.gemm` called directly on strided numpy views, where it must write into the output view
(in place, with no result copy, when the view's strides allow the [batch, rows, columns] shape).
"""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest
from _thunk_helpers import (
    assert_close,
    assert_exact,
    poisoned_memory,  # noqa: F401  (autouse: fresh memory starts as poison)
    random_array,
    run_both,
)

from hlocc.evaluator.dot import contraction_dtype, dot_general, to_result
from hlocc.hlo.types import Layout, Shape, from_dtype
from hlocc.runtime import library
from hlocc.runtime.buffer_assignment import BufferSlice
from hlocc.runtime.thunks import BufferRef

BF16 = np.dtype(ml_dtypes.bfloat16)


def type_name(dtype) -> str:
    return from_dtype(np.dtype(dtype)).name


def shape_text(dtype, dims, minor_to_major=None) -> str:
    dims = list(dims)
    layout = "" if minor_to_major is None else "{" + ",".join(map(str, minor_to_major)) + "}"
    return f"{type_name(dtype)}[{','.join(map(str, dims))}]{layout}"


def is_exact_type(dtype) -> bool:
    """Integers and preds: a contraction's result is exact whatever the summation order."""
    t = from_dtype(np.dtype(dtype))
    return t.is_integer or t.is_pred


def braces(values) -> str:
    return "{" + ",".join(map(str, values)) + "}"


# -- gemm through the runtime ----------------------------------------------------------------------


def dot_module(lhs_dims, rhs_dims, lc, rc, lb, rb, dtypes=(np.float32,) * 3, layouts=(None, None, None)) -> str:
    lhs_free = [d for d in range(len(lhs_dims)) if d not in lc and d not in lb]
    rhs_free = [d for d in range(len(rhs_dims)) if d not in rc and d not in rb]
    out_dims = [lhs_dims[d] for d in lb] + [lhs_dims[d] for d in lhs_free] + [rhs_dims[d] for d in rhs_free]
    attrs = [f"{name}={braces(v)}" for name, v in (("lhs_batch_dims", lb), ("lhs_contracting_dims", lc),
                                                   ("rhs_batch_dims", rb), ("rhs_contracting_dims", rc)) if v]
    return f"""HloModule dot
ENTRY e {{
  a = {shape_text(dtypes[0], lhs_dims, layouts[0])} parameter(0)
  b = {shape_text(dtypes[1], rhs_dims, layouts[1])} parameter(1)
  ROOT d = {shape_text(dtypes[2], out_dims, layouts[2])} dot(a, b){', ' if attrs else ''}{', '.join(attrs)}
}}"""


def check_gemm(text: str, lhs: np.ndarray, rhs: np.ndarray, rtol: float = 1e-5, hlo_passes: bool = False):
    exe, got, ref = run_both(text, lhs, rhs, hlo_passes=hlo_passes, gemm="library")
    if not hlo_passes:
        assert dict(exe.runner.stats.library_calls) == {"gemm": 1} and exe.runner.stats.kernels == 0, \
            exe.runner.stats.to_string()
        assert not exe.runner.stats.host_ops
    if is_exact_type(ref.dtype):
        assert_exact(got, ref)
    else:
        assert_close(got, ref, rtol=rtol, atol=rtol)
    return exe, got


# (lhs dims, rhs dims, lhs contracting, rhs contracting, lhs batch, rhs batch)
DOT_CASES = {
    "matmul": ([3, 4], [4, 5], [1], [0], [], []),
    "matmul_transposed_lhs": ([4, 3], [4, 5], [0], [0], [], []),
    "matmul_transposed_rhs": ([3, 4], [5, 4], [1], [1], [], []),
    "vector_matrix": ([4], [4, 5], [0], [0], [], []),
    "matrix_vector": ([3, 4], [4], [1], [0], [], []),
    "vector_vector": ([4], [4], [0], [0], [], []),
    "outer_product": ([3], [5], [], [], [], []),
    "outer_product_matrices": ([2, 3], [4, 2], [], [], [], []),
    "batch_first": ([2, 3, 4], [2, 4, 5], [2], [1], [0], [0]),
    "batch_last": ([3, 4, 2], [4, 5, 2], [1], [0], [2], [2]),
    "batch_middle_lhs_last_rhs": ([3, 2, 4], [4, 5, 2], [2], [0], [1], [2]),
    "two_batch_dims_swapped": ([2, 3, 4, 6], [3, 2, 6, 5], [3], [2], [0, 1], [1, 0]),
    "two_contracting_dims": ([3, 4, 2], [2, 5, 4], [1, 2], [2, 0], [], []),
    "two_contracting_dims_reversed": ([4, 3, 2], [2, 4, 5], [2, 0], [0, 1], [], []),
    "batch_no_contracting": ([2, 3], [2, 5], [], [], [0], [0]),
    "batch_only": ([2, 3], [3, 2], [], [], [0, 1], [1, 0]),
    "size_1_dims": ([1, 3, 1], [1, 1, 5], [2], [1], [0], [0]),
    "zero_contracting": ([3, 0], [0, 5], [1], [0], [], []),
    "zero_rows": ([0, 4], [4, 5], [1], [0], [], []),
    "zero_batch": ([0, 3, 4], [0, 4, 5], [2], [1], [0], [0]),
}


def _operands(case, dtypes, seed=1):
    rng = np.random.default_rng(seed)
    return random_array(tuple(case[0]), dtypes[0], rng), random_array(tuple(case[1]), dtypes[1], rng)


@pytest.mark.parametrize("name", DOT_CASES)
def test_gemm_dimension_numbers(name):
    case = DOT_CASES[name]
    check_gemm(dot_module(*case), *_operands(case, (np.float32,) * 2))


@pytest.mark.parametrize("name", ["matmul", "batch_middle_lhs_last_rhs", "outer_product", "zero_contracting"])
def test_gemm_after_hlo_passes(name):
    case = DOT_CASES[name]
    check_gemm(dot_module(*case), *_operands(case, (np.float32,) * 2), hlo_passes=True)


@pytest.mark.parametrize("name", ["vector_matrix", "matrix_vector", "vector_vector"])
def test_gemm_on_vectors_after_hlo_passes_needs_no_kernel(name):
    case = DOT_CASES[name]
    exe, _ = check_gemm(dot_module(*case), *_operands(case, (np.float32,) * 2), hlo_passes=True)
    assert exe.runner.stats.library_calls["gemm"] == 1
    assert exe.runner.stats.kernels == 0, exe.runner.to_string()


def test_gemm_zero_contracting_writes_zeros_over_garbage():
    # The output buffer of a fresh run is uninitialized: a k=0 gemm must still write every element.
    case = DOT_CASES["zero_contracting"]
    _, got = check_gemm(dot_module(*case), *_operands(case, (np.float32,) * 2))
    assert got.shape == (3, 5) and not got.any()


DTYPES = {
    "f32": (np.float32, np.float32, np.float32, 1e-5),
    "f64": (np.float64, np.float64, np.float64, 1e-12),
    "bf16_to_f32": (BF16, BF16, np.float32, 1e-5),
    "bf16": (BF16, BF16, BF16, 1 / 128),
    "f16": (np.float16, np.float16, np.float16, 2e-3),
    "s8_to_s32": (np.int8, np.int8, np.int32, 0),
    "s32": (np.int32, np.int32, np.int32, 0),
    "pred": (np.bool_, np.bool_, np.bool_, 0),
    "u8": (np.uint8, np.uint8, np.uint8, 0),
    "c64": (np.complex64, np.complex64, np.complex64, 1e-5),
    "c128": (np.complex128, np.complex128, np.complex128, 1e-12),
    "f32_to_f64": (np.float32, np.float32, np.float64, 1e-12),
    "s8_wraps": (np.int8, np.int8, np.int8, 0),
    "s4_to_s32": (np.dtype(ml_dtypes.int4), np.dtype(ml_dtypes.int4), np.int32, 0),
    "f8_to_f32": (np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e4m3fn), np.float32, 1e-5),
    "u4": (np.dtype(ml_dtypes.uint4),) * 3 + (0,),
}


@pytest.mark.parametrize("case_name", ["matmul", "batch_middle_lhs_last_rhs", "two_contracting_dims", "outer_product"])
@pytest.mark.parametrize("dtype_name", DTYPES)
def test_gemm_dtypes(dtype_name, case_name):
    *dtypes, rtol = DTYPES[dtype_name]
    case = DOT_CASES[case_name]
    check_gemm(dot_module(*case, dtypes=dtypes), *_operands(case, dtypes), rtol=rtol)


def test_gemm_s8_products_do_not_wrap_in_s8():
    # -128 * -128 summed 4 times = 65536: exact only if the products are computed in s32.
    lhs = np.full((3, 4), -128, np.int8)
    rhs = np.full((4, 5), -128, np.int8)
    _, got = check_gemm(dot_module(*DOT_CASES["matmul"], dtypes=(np.int8, np.int8, np.int32)), lhs, rhs)
    assert (got == 65536).all()


def test_gemm_u8_wraps_like_the_evaluator():
    lhs = np.full((3, 4), 200, np.uint8)
    rhs = np.full((4, 5), 3, np.uint8)
    _, got = check_gemm(dot_module(*DOT_CASES["matmul"], dtypes=(np.uint8,) * 3), lhs, rhs)
    assert (got == (200 * 3 * 4) % 256).all()


# Layouts: every permutation of lhs, rhs and output for a batched case.
LAYOUTS_3D = [list(p) for p in itertools.permutations(range(3))]


@pytest.mark.parametrize("out_layout", LAYOUTS_3D, ids=str)
@pytest.mark.parametrize("lhs_layout", LAYOUTS_3D[::2], ids=str)
def test_gemm_non_default_layouts(lhs_layout, out_layout):
    case = DOT_CASES["batch_middle_lhs_last_rhs"]
    for rhs_layout in ([0, 1, 2], [2, 0, 1]):
        text = dot_module(*case, layouts=(lhs_layout, rhs_layout, out_layout))
        check_gemm(text, *_operands(case, (np.float32,) * 2))


@pytest.mark.parametrize("dtype_name", ["bf16", "s8_to_s32", "pred", "c64"])
def test_gemm_column_major_matrices(dtype_name):
    *dtypes, rtol = DTYPES[dtype_name]
    case = DOT_CASES["matmul"]
    text = dot_module(*case, dtypes=dtypes, layouts=([0, 1], [0, 1], [0, 1]))
    assert "[3,5]{0,1}" in text
    check_gemm(text, *_operands(case, dtypes), rtol=rtol)


def random_dot_case(rng: np.random.Generator):
    """Random dimension numbers: 0-2 batch, 0-2 contracting and 0-2 free dims per side, placed at
    random positions, with random layouts for both operands and the result."""
    nb, nc, nl, nr = (int(rng.integers(0, 3)) for _ in range(4))
    batch = [int(rng.integers(1, 4)) for _ in range(nb)]
    contract = [int(rng.integers(0 if rng.random() < 0.05 else 1, 4)) for _ in range(nc)]
    lfree = [int(rng.integers(1, 4)) for _ in range(nl)]
    rfree = [int(rng.integers(1, 4)) for _ in range(nr)]

    def place(free):
        roles = [("b", i) for i in range(nb)] + [("c", i) for i in range(nc)] + [("f", i) for i in range(len(free))]
        order = [roles[k] for k in rng.permutation(len(roles))]
        size = {"b": batch, "c": contract, "f": free}
        dims = [size[r][i] for r, i in order]
        return dims, [order.index(("c", i)) for i in range(nc)], [order.index(("b", i)) for i in range(nb)]

    lhs_dims, lc, lb = place(lfree)
    rhs_dims, rc, rb = place(rfree)
    out_rank = nb + nl + nr
    layouts = tuple([int(d) for d in rng.permutation(rank)] for rank in (len(lhs_dims), len(rhs_dims), out_rank))
    return (lhs_dims, rhs_dims, lc, rc, lb, rb), layouts


@pytest.mark.parametrize("seed", range(40))
def test_gemm_random_dimension_numbers(seed):
    rng = np.random.default_rng(seed)
    case, layouts = random_dot_case(rng)
    dtypes = [(np.float32,) * 3, (np.int32,) * 3, (BF16, BF16, np.float32)][seed % 3]
    check_gemm(dot_module(*case, dtypes=dtypes, layouts=layouts), *_operands(case, dtypes, seed))


# -- library.gemm on numpy views -------------------------------------------------------------------


def reference_gemm(out_dtype, lhs, rhs, lc, rc, lb, rb) -> np.ndarray:
    dtype = contraction_dtype(lhs.dtype, rhs.dtype, result=np.dtype(out_dtype))
    return to_result(dot_general(lhs, rhs, lc, rc, lb, rb, dtype), np.dtype(out_dtype))


def no_result_copy(monkeypatch) -> None:
    """Make library.gemm fail if it converts (and so copies) its result instead of writing in place."""
    def refuse(*_):
        raise AssertionError("gemm copied its result instead of writing into the output view")
    monkeypatch.setattr(library, "to_result", refuse)


def test_library_gemm_writes_in_place_into_a_strided_output(monkeypatch):
    rng = np.random.default_rng(3)
    lhs, rhs = random_array((3, 4), np.float32, rng), random_array((4, 5), np.float32, rng)
    storage = np.full((5, 8), np.nan, np.float32)
    out = storage[1:4, 2:7]  # rows of stride 8: reshapes to [1, 3, 5] without a copy
    no_result_copy(monkeypatch)
    library.gemm(out, lhs, rhs, [1], [0], [], [])
    np.testing.assert_allclose(out, lhs @ rhs, rtol=1e-5)
    assert np.shares_memory(out, storage)
    untouched = np.ones_like(storage, bool)
    untouched[1:4, 2:7] = False
    assert np.isnan(storage[untouched]).all(), "gemm wrote outside its output view"


def test_library_gemm_writes_in_place_into_a_transposed_output(monkeypatch):
    # A column-major output (layout {0,1}) is the logical view np.transpose(physical).
    rng = np.random.default_rng(4)
    lhs, rhs = random_array((3, 4), np.float32, rng), random_array((4, 5), np.float32, rng)
    physical = np.zeros((5, 3), np.float32)
    out = physical.T
    no_result_copy(monkeypatch)
    library.gemm(out, lhs, rhs, [1], [0], [], [])
    np.testing.assert_allclose(physical, (lhs @ rhs).T, rtol=1e-5)


def test_library_gemm_reads_strided_and_transposed_operands(monkeypatch):
    rng = np.random.default_rng(5)
    big_lhs = random_array((2, 6, 9), np.float32, rng)
    lhs = big_lhs[:, ::2, 1:8:2].transpose(0, 2, 1)  # [2, 4, 3]: batch, contracting, rows
    big_rhs = random_array((5, 2, 4), np.float32, rng)
    rhs = big_rhs.transpose(1, 2, 0)  # [2, 4, 5]: batch, contracting, columns
    out = np.empty((2, 3, 5), np.float32)
    lhs_before, rhs_before = lhs.copy(), rhs.copy()
    no_result_copy(monkeypatch)
    library.gemm(out, lhs, rhs, [1], [1], [0], [0])
    np.testing.assert_allclose(out, np.einsum("bkm,bkn->bmn", lhs, rhs), rtol=1e-5)
    np.testing.assert_array_equal(lhs, lhs_before)
    np.testing.assert_array_equal(rhs, rhs_before)


def test_library_gemm_unmergeable_output_view_is_still_written():
    # Output [2, 3, 2, 2] viewed from a transposed buffer: the two rhs free dims cannot merge into
    # one without a copy, so gemm computes aside and copies into the view.
    rng = np.random.default_rng(6)
    lhs = random_array((2, 3, 4), np.float32, rng)
    rhs = random_array((2, 4, 2, 2), np.float32, rng)
    physical = np.full((2, 2, 3, 2), np.nan, np.float32)
    out = physical.transpose(1, 2, 0, 3)  # strides (6, 2, 12, 1) elements
    assert out.shape == (2, 3, 2, 2)
    library.gemm(out, lhs, rhs, [2], [1], [0], [0])
    np.testing.assert_allclose(out, reference_gemm(np.float32, lhs, rhs, [2], [1], [0], [0]), rtol=1e-5)
    assert not np.isnan(physical).any()


@pytest.mark.parametrize("dtypes", [(BF16, BF16, BF16), (np.int8, np.int8, np.int32), (np.bool_, np.bool_, np.bool_),
                                    (np.uint8, np.uint8, np.uint8), (np.float16, np.float16, np.float32)],
                         ids=lambda d: "x".join(type_name(t) for t in d))
def test_library_gemm_converts_into_a_strided_output_of_another_type(dtypes):
    rng = np.random.default_rng(7)
    lhs, rhs = random_array((4, 3), dtypes[0], rng), random_array((5, 4), dtypes[1], rng)
    storage = np.zeros((6, 11), dtypes[2])
    out = storage[::2, 1::2]  # [3, 5], strided both ways
    library.gemm(out, lhs, rhs, [0], [1], [], [])
    expected = reference_gemm(dtypes[2], lhs, rhs, [0], [1], [], [])
    assert np.shares_memory(out, storage)
    if is_exact_type(dtypes[2]):
        np.testing.assert_array_equal(out, expected)
    else:
        np.testing.assert_allclose(out.astype(np.float64), expected.astype(np.float64), rtol=1 / 128)


@pytest.mark.parametrize("seed", range(20))
def test_library_gemm_random_views(seed):
    """Random dimension numbers on operands and outputs that are random transposes of their storage."""
    rng = np.random.default_rng(100 + seed)
    (lhs_dims, rhs_dims, lc, rc, lb, rb), _ = random_dot_case(rng)

    def permuted_view(dims, dtype):
        perm = rng.permutation(len(dims))
        storage = random_array(tuple(dims[p] for p in perm), dtype, rng)
        return np.transpose(storage, np.argsort(perm))
    lhs, rhs = permuted_view(lhs_dims, np.float32), permuted_view(rhs_dims, np.float32)
    expected = reference_gemm(np.float32, lhs, rhs, lc, rc, lb, rb)
    out = permuted_view(list(expected.shape), np.float32)
    out[...] = np.nan
    library.gemm(out, lhs, rhs, lc, rc, lb, rb)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


# -- convolution -----------------------------------------------------------------------------------


def conv_module(labels: str, batch: int, features: int, spatial, kernel, out_features: int, *,
                stride=None, pad=None, lhs_dilate=None, rhs_dilate=None, rhs_reversal=None, feature_groups: int = 1,
                batch_groups: int = 1, dtypes=(np.float32,) * 3, layouts=(None, None, None)) -> tuple[str, tuple, tuple]:
    """A convolution module in `labels` (e.g. "b01f_01io->b01f"): (text, lhs dims, rhs dims)."""
    n = len(spatial)
    stride = stride or [1] * n
    pad = pad or [(0, 0)] * n
    lhs_dilate = lhs_dilate or [1] * n
    rhs_dilate = rhs_dilate or [1] * n
    out_spatial = []
    for k in range(n):
        padded = (spatial[k] - 1) * lhs_dilate[k] + 1 + pad[k][0] + pad[k][1]
        window = (kernel[k] - 1) * rhs_dilate[k] + 1
        out_spatial.append(max(0, (padded - window) // stride[k] + 1))
    lhs_labels, rest = labels.split("_")
    rhs_labels, out_labels = rest.split("->")

    def dims(text, sizes, spatial_sizes):
        return [sizes[c] if c in sizes else spatial_sizes[int(c)] for c in text]
    lhs_dims = dims(lhs_labels, {"b": batch, "f": features}, spatial)
    rhs_dims = dims(rhs_labels, {"i": features // feature_groups, "o": out_features}, kernel)
    out_dims = dims(out_labels, {"b": batch // batch_groups, "f": out_features}, out_spatial)
    window = (f"size={'x'.join(map(str, kernel))} stride={'x'.join(map(str, stride))} "
              f"pad={'x'.join(f'{lo}_{hi}' for lo, hi in pad)} lhs_dilate={'x'.join(map(str, lhs_dilate))} "
              f"rhs_dilate={'x'.join(map(str, rhs_dilate))}")
    if rhs_reversal:
        window += f" rhs_reversal={'x'.join(map(str, rhs_reversal))}"
    groups = (f", feature_group_count={feature_groups}" if feature_groups > 1 else "") + \
        (f", batch_group_count={batch_groups}" if batch_groups > 1 else "")
    text = f"""HloModule conv
ENTRY e {{
  x = {shape_text(dtypes[0], lhs_dims, layouts[0])} parameter(0)
  k = {shape_text(dtypes[1], rhs_dims, layouts[1])} parameter(1)
  ROOT c = {shape_text(dtypes[2], out_dims, layouts[2])} convolution(x, k), window={{{window}}}, dim_labels={labels}{groups}
}}"""
    return text, tuple(lhs_dims), tuple(rhs_dims)


CONV_CASES = {
    "nchw": dict(labels="bf01_oi01->bf01", batch=2, features=3, spatial=[5, 6], kernel=[3, 2], out_features=4),
    "nhwc": dict(labels="b01f_01io->b01f", batch=2, features=3, spatial=[5, 6], kernel=[3, 2], out_features=4),
    "mixed_labels": dict(labels="f0b1_i10o->1fb0", batch=2, features=3, spatial=[5, 4], kernel=[2, 3],
                         out_features=2),
    "strided": dict(labels="b01f_01io->b01f", batch=1, features=2, spatial=[7, 6], kernel=[3, 3], out_features=3,
                    stride=[2, 3]),
    "padded": dict(labels="bf01_oi01->bf01", batch=1, features=2, spatial=[4, 5], kernel=[3, 3], out_features=2,
                   pad=[(1, 2), (2, 0)]),
    "negative_padding": dict(labels="bf01_oi01->bf01", batch=1, features=2, spatial=[7, 6], kernel=[2, 2],
                             out_features=2, pad=[(-1, -2), (1, -1)]),
    "lhs_dilation": dict(labels="bf01_oi01->bf01", batch=1, features=2, spatial=[4, 3], kernel=[2, 2], out_features=2,
                         lhs_dilate=[2, 3], pad=[(1, 1), (0, 0)]),
    "rhs_dilation": dict(labels="b01f_01io->b01f", batch=2, features=2, spatial=[7, 6], kernel=[2, 3],
                         out_features=2, rhs_dilate=[3, 2]),
    "everything": dict(labels="b01f_01io->b01f", batch=2, features=4, spatial=[7, 8], kernel=[3, 2], out_features=4,
                       stride=[2, 1], pad=[(2, -1), (-1, 1)], lhs_dilate=[1, 2], rhs_dilate=[2, 1],
                       feature_groups=2),
    "feature_groups": dict(labels="bf01_oi01->bf01", batch=2, features=6, spatial=[4, 4], kernel=[2, 2],
                           out_features=6, feature_groups=3),
    "depthwise": dict(labels="b01f_01io->b01f", batch=1, features=4, spatial=[5, 5], kernel=[3, 3], out_features=4,
                      feature_groups=4),
    "batch_groups": dict(labels="bf01_oi01->bf01", batch=4, features=3, spatial=[4, 4], kernel=[2, 2],
                         out_features=4, batch_groups=2),
    "batch_groups_nhwc": dict(labels="b01f_01io->b01f", batch=6, features=2, spatial=[5, 3], kernel=[2, 2],
                              out_features=3, batch_groups=3),
    "1d": dict(labels="bf0_oi0->bf0", batch=2, features=3, spatial=[9], kernel=[4], out_features=2, stride=[2],
               pad=[(1, 1)]),
    "3d": dict(labels="b012f_012io->b012f", batch=1, features=2, spatial=[4, 3, 5], kernel=[2, 2, 3], out_features=2),
    "window_reversal": dict(labels="b01f_01io->b01f", batch=1, features=2, spatial=[5, 4], kernel=[3, 2],
                            out_features=2, rhs_reversal=[1, 0], pad=[(1, 1), (0, 1)]),
    "few_positions": dict(labels="bf01_oi01->bf01", batch=3, features=5, spatial=[3, 2], kernel=[2, 1],
                          out_features=4),  # 2 positions per image: the images side by side in one product
    "window_larger_than_input": dict(labels="bf01_oi01->bf01", batch=1, features=1, spatial=[2, 2], kernel=[3, 3],
                                     out_features=1),
    # (an empty batch: the stride-1 patches reshaped 0 elements with a -1, a numpy ValueError)
    "empty_batch": dict(labels="bf0_oi0->bf0", batch=0, features=16, spatial=[8], kernel=[3], out_features=8,
                        pad=[(1, 1)]),
    "no_input_features": dict(labels="bf01_oi01->bf01", batch=2, features=0, spatial=[4, 4], kernel=[2, 2],
                              out_features=3),  # sums of no terms: zeros
}


@pytest.mark.parametrize("name", CONV_CASES)
def test_convolution(name):
    text, lhs_dims, rhs_dims = conv_module(**CONV_CASES[name])
    rng = np.random.default_rng(11)
    exe, got, ref = run_both(text, random_array(lhs_dims, np.float32, rng), random_array(rhs_dims, np.float32, rng),
                             hlo_passes=False)
    assert dict(exe.runner.stats.library_calls) == {"convolution": 1}, exe.runner.stats.to_string()
    assert_close(got, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtypes,rtol", [((BF16, BF16, np.float32), 1e-5), ((BF16, BF16, BF16), 1 / 128),
                                         ((np.float16, np.float16, np.float16), 2e-3),
                                         ((np.float64,) * 3, 1e-12), ((np.int8, np.int8, np.int32), 0),
                                         ((np.int32,) * 3, 0)],
                         ids=["bf16_to_f32", "bf16", "f16", "f64", "s8_to_s32", "s32"])
def test_convolution_dtypes(dtypes, rtol):
    text, lhs_dims, rhs_dims = conv_module(**CONV_CASES["everything"], dtypes=dtypes)
    rng = np.random.default_rng(12)
    exe, got, ref = run_both(text, random_array(lhs_dims, dtypes[0], rng), random_array(rhs_dims, dtypes[1], rng),
                             hlo_passes=False)
    assert dict(exe.runner.stats.library_calls) == {"convolution": 1}
    if is_exact_type(dtypes[2]):
        assert_exact(got, ref)
    else:
        assert_close(got, ref, rtol=rtol, atol=rtol)


def test_convolution_non_default_layouts_and_hlo_passes():
    text, lhs_dims, rhs_dims = conv_module(**CONV_CASES["nchw"])
    text = (text.replace("f32[2,3,5,6]", "f32[2,3,5,6]{1,3,2,0}").replace("f32[4,3,3,2]", "f32[4,3,3,2]{0,1,2,3}")
            .replace("ROOT c = f32[2,4,3,5]", "ROOT c = f32[2,4,3,5]{2,3,0,1}"))
    assert text.count("}{") == 0 and "{1,3,2,0}" in text and "{2,3,0,1}" in text
    rng = np.random.default_rng(13)
    args = random_array(lhs_dims, np.float32, rng), random_array(rhs_dims, np.float32, rng)
    for hlo_passes in (False, True):  # with HLO passes an implicit-gemm fusion (convolution-gemm-fusion)
        exe, got, ref = run_both(text, *args, hlo_passes=hlo_passes)
        stats = exe.runner.stats
        assert (stats.library_calls["convolution"], stats.fusions_by_emitter["gemm"]) == \
            ((0, 1) if hlo_passes else (1, 0)), stats.to_string()
        assert_close(got, ref, rtol=1e-5, atol=1e-5)


def random_conv_case(rng: np.random.Generator) -> dict:
    """Random 2-d dimension labels, layouts, strides, (negative) padding, dilations and groups."""
    def labels(chars):
        return "".join(chars[k] for k in rng.permutation(len(chars)))
    groups = [1, 1, 2, 3][int(rng.integers(0, 4))]
    grouping = "feature" if rng.random() < 0.5 else "batch"
    features = groups * int(rng.integers(1, 3)) if grouping == "feature" else int(rng.integers(1, 4))
    batch = groups * int(rng.integers(1, 3)) if grouping == "batch" else int(rng.integers(1, 3))
    return dict(labels=f"{labels('bf01')}_{labels('io01')}->{labels('bf01')}", batch=batch, features=features,
                spatial=[int(v) for v in rng.integers(1, 7, 2)], kernel=[int(v) for v in rng.integers(1, 4, 2)],
                out_features=groups * int(rng.integers(1, 3)), stride=[int(v) for v in rng.integers(1, 3, 2)],
                pad=[(int(lo), int(hi)) for lo, hi in rng.integers(-1, 3, (2, 2))],
                lhs_dilate=[int(v) for v in rng.integers(1, 3, 2)], rhs_dilate=[int(v) for v in rng.integers(1, 3, 2)],
                feature_groups=groups if grouping == "feature" else 1, batch_groups=groups if grouping == "batch" else 1,
                layouts=tuple([int(d) for d in rng.permutation(4)] for _ in range(3)))


@pytest.mark.parametrize("seed", range(30))
def test_convolution_random(seed):
    rng = np.random.default_rng(200 + seed)
    text, lhs_dims, rhs_dims = conv_module(**random_conv_case(rng))
    dtypes = [np.float32, np.int32][seed % 2]
    text = text.replace("f32", type_name(dtypes))
    args = random_array(lhs_dims, dtypes, rng), random_array(rhs_dims, dtypes, rng)
    exe, got, ref = run_both(text, *args, hlo_passes=False)
    assert dict(exe.runner.stats.library_calls) == {"convolution": 1}, text
    if is_exact_type(dtypes):
        assert_exact(got, ref)
    else:
        assert_close(got, ref, rtol=1e-5, atol=1e-5)


def _ref(allocation: int, offset: int, dims, layout=None) -> BufferRef:
    shape = Shape.array("f32", tuple(dims), Layout(tuple(layout)) if layout else None)
    return BufferRef(BufferSlice(allocation, offset, 4 * int(np.prod(dims))), shape)


def test_gemm_buffers_views_each_call_s_allocations():
    """The views and plan of a thunk's references are made once, the arrays from each call's
    allocations: a second call with other memory reads and writes that memory."""
    lhs, rhs, out = _ref(0, 16, (3, 4)), _ref(1, 0, (5, 4), layout=(0, 1)), _ref(2, 8, (3, 5))
    dims = ((1,), (1,), (), ())
    rng = np.random.default_rng(11)
    for _ in range(2):
        a, w = random_array((3, 4), np.float32, rng), random_array((5, 4), np.float32, rng)
        allocations = [np.zeros(16 + a.nbytes, np.uint8), np.ascontiguousarray(w.T).view(np.uint8).reshape(-1),
                       np.full(8 + 60, 255, np.uint8)]
        allocations[0][16:] = a.view(np.uint8).reshape(-1)
        library.gemm_buffers(allocations, out, lhs, rhs, dims)
        np.testing.assert_allclose(allocations[2][8:].view(np.float32).reshape(3, 5), a @ w.T, rtol=1e-5)
        assert (allocations[2][:8] == 255).all(), "gemm wrote outside its output slice"


def test_gemm_buffers_of_an_empty_output_past_its_allocation():
    lhs, rhs, out = _ref(0, 0, (0, 4)), _ref(1, 0, (4, 5)), _ref(2, 64, (0, 5))
    allocations = [np.zeros(0, np.uint8), np.zeros(80, np.uint8), np.zeros(64, np.uint8)]
    library.gemm_buffers(allocations, out, lhs, rhs, ((1,), (0,), (), ()))


@pytest.mark.parametrize("out_layout", [None, (0, 1, 2), (1, 0, 2)])
@pytest.mark.parametrize("lhs_layout", [None, (1, 2, 0)])
def test_gemm_recipe_binds_the_plan_the_arrays_would_give(lhs_layout, out_layout):
    """A dynamic program's gemm (GemmRecipe, numbers by position) at several sizes, 0 and 1
    included: the plan made from the views' shapes is the one made from arrays in those buffers,
    and the bound step writes what numpy computes."""
    from hlocc.hlo.symbolic import symbol

    def ref(allocation, dims, layout=None):  # (the slice's size is the buffer's business, not the gemm's)
        shape = Shape.array("f32", dims, Layout(tuple(layout)) if layout else None)
        return BufferRef(BufferSlice(allocation, 0, 0), shape)

    s = symbol("s")
    index = {s: 0}
    lhs, rhs, out = ref(0, (2, s, 4), lhs_layout), ref(1, (2, 4, 5)), ref(2, (2, s, 5), out_layout)
    dims = ((2,), (1,), (0,), (0,))
    recipe = library.GemmRecipe.of(out, lhs, rhs, dims, index.__getitem__)
    rng = np.random.default_rng(5)
    for n in (3, 0, 1, 7):
        bound = recipe.at((n,))
        a, w = random_array((2, n, 4), np.float32, rng), random_array((2, 4, 5), np.float32, rng)
        allocations = [np.empty(a.nbytes, np.uint8), np.ascontiguousarray(w).view(np.uint8).reshape(-1),
                       np.full(2 * n * 5 * 4, 255, np.uint8)]
        lhs_view, out_view = bound.lhs.view(allocations), bound.out.view(allocations)
        lhs_view[...] = a
        assert bound.plan == library._gemm_plan(out_view, lhs_view, bound.rhs.view(allocations), *dims)

        class Memory:
            pass
        memory = Memory()
        memory.allocations = allocations
        bound.execute(memory)
        np.testing.assert_allclose(bound.out.view(allocations), a @ w, rtol=1e-5, atol=1e-6)
