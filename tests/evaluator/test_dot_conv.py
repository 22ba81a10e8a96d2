"""dot, ragged-dot, scaled-dot and convolution in the reference evaluator."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from _compute_helpers import assert_same_bits, run, run_jax

import hlocc


def dot_module(lhs: str, rhs: str, out: str, attrs: str) -> str:
    return f"""
ENTRY e {{
  a = {lhs} parameter(0)
  b = {rhs} parameter(1)
  ROOT d = {out} dot(a, b), {attrs}
}}"""


def test_dot_matrix_product_hand_computed():
    a = np.array([[1, 2], [3, 4]], np.float32)
    b = np.array([[5, 6], [7, 8]], np.float32)
    out = run(dot_module("f32[2,2]", "f32[2,2]", "f32[2,2]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
              a, b)
    assert_same_bits(out, np.array([[19, 22], [43, 50]], np.float32))


def test_dot_s8_operands_s32_result_does_not_wrap_in_s8():
    a = np.full((1, 4), 100, np.int8)
    b = np.full((4, 1), 100, np.int8)
    out = run(dot_module("s8[1,4]", "s8[4,1]", "s32[1,1]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
              a, b)
    assert_same_bits(out, np.array([[40000]], np.int32))


def test_dot_s32_wraps():
    a = np.array([[2**30, 2**30, 2**30]], np.int32)
    b = np.array([[2], [1], [1]], np.int32)
    out = run(dot_module("s32[1,3]", "s32[3,1]", "s32[1,1]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
              a, b)
    assert_same_bits(out, np.array([[0]], np.int32))  # 2^32 wraps to 0


def test_dot_bf16_accumulates_in_f32_and_rounds_once():
    a = np.ones((1, 300), ml_dtypes.bfloat16)
    b = np.ones((300, 1), ml_dtypes.bfloat16)
    out = run(dot_module("bf16[1,300]", "bf16[300,1]", "bf16[1,1]",
                         "lhs_contracting_dims={1}, rhs_contracting_dims={0}"), a, b)
    assert out.dtype == ml_dtypes.bfloat16 and float(out[0, 0]) == 300.0


def test_dot_empty_contraction_gives_zeros():
    out = run(dot_module("f32[2,0]", "f32[0,3]", "f32[2,3]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
              np.zeros((2, 0), np.float32), np.zeros((0, 3), np.float32))
    assert_same_bits(out, np.zeros((2, 3), np.float32))


@pytest.mark.parametrize("lhs_shape,rhs_shape,dims", [
    ((3, 4), (4, 5), (((1,), (0,)), ((), ()))),
    ((2, 3, 4), (2, 5, 4), (((2,), (2,)), ((0,), (0,)))),
    ((4, 2, 3, 5), (3, 6, 2, 4), (((2, 0), (0, 3)), ((1,), (2,)))),
    ((3,), (3,), (((0,), (0,)), ((), ()))),
    ((2, 3), (4,), (((), ()), ((), ()))),
])
@pytest.mark.parametrize("in_dtype,out_dtype", [
    ("float32", None), ("bfloat16", "float32"), ("float16", "float16"), ("int8", "int32"), ("int32", None)])
def test_dot_general_matches_jax(lhs_shape, rhs_shape, dims, in_dtype, out_dtype):
    pytest.importorskip("jax")
    from jax import lax

    rng = np.random.default_rng(6)
    dtype = np.dtype(getattr(ml_dtypes, in_dtype, None) or in_dtype)
    if dtype.kind in "iu":
        a, b = (rng.integers(-100, 100, size=s).astype(dtype) for s in (lhs_shape, rhs_shape))
    else:
        a, b = (rng.standard_normal(s).astype(dtype) for s in (lhs_shape, rhs_shape))
    pref = None if out_dtype is None else np.dtype(out_dtype)
    ours, theirs = run_jax(lambda x, y: lax.dot_general(x, y, dims, preferred_element_type=pref), a, b)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    if dtype.kind in "iu":
        assert_same_bits(ours, theirs)
    else:
        tol = 1e-2 if ours.dtype == np.float16 else 1e-5
        np.testing.assert_allclose(ours.astype(np.float32), theirs.astype(np.float32), rtol=tol, atol=tol)


def test_ragged_dot_non_contracting_groups():
    jax = pytest.importorskip("jax")
    rng = np.random.default_rng(7)
    lhs = rng.standard_normal((7, 3)).astype(np.float32)
    rhs = rng.standard_normal((3, 3, 2)).astype(np.float32)
    sizes = np.array([2, 0, 4], np.int32)  # the last row belongs to no group: zeros
    text = """
ENTRY e {
  a = f32[7,3] parameter(0)
  b = f32[3,3,2] parameter(1)
  g = s32[3] parameter(2)
  ROOT d = f32[7,2] ragged-dot(a, b, g), lhs_contracting_dims={1}, rhs_contracting_dims={1}, lhs_ragged_dims={0}, rhs_group_dims={0}
}"""
    expected = np.asarray(jax.lax.ragged_dot(lhs, rhs, sizes))
    ours = run(text, lhs, rhs, sizes)
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-5)
    assert np.all(ours[6] == 0)


RAGGED_CASES = [  # (lhs, rhs, group_sizes, out, attrs, jax dimension numbers)
    ((19, 11, 5), (3, 5, 7), (19, 3), (19, 11, 7),
     "lhs_contracting_dims={2}, rhs_contracting_dims={1}, lhs_ragged_dims={1}, rhs_group_dims={0}",
     dict(dims=(([2], [1]), ([], [])), lhs_ragged=[1], rhs_group=[0])),
    ((11, 19, 5), (19, 5, 7), (19, 3), (3, 11, 7),
     "lhs_contracting_dims={1,2}, rhs_contracting_dims={0,1}, lhs_ragged_dims={2}",
     dict(dims=(([1, 2], [0, 1]), ([], [])), lhs_ragged=[2], rhs_group=[])),
    ((4, 6, 3, 5), (4, 6, 5, 2), (4, 3), (4, 6, 3, 2),
     "lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,1}, rhs_contracting_dims={2}, "
     "lhs_ragged_dims={1}", dict(dims=(([3], [2]), ([0, 1], [0, 1])), lhs_ragged=[1], rhs_group=[])),
]


@pytest.mark.parametrize("case", RAGGED_CASES, ids=["noncontracting", "contracting", "batch"])
def test_ragged_dot_general_matches_jax(case):
    pytest.importorskip("jax")
    from jax import lax

    lhs_shape, rhs_shape, sizes_shape, out_shape, attrs, dn = case
    rng = np.random.default_rng(20)
    lhs = rng.standard_normal(lhs_shape).astype(np.float32)
    rhs = rng.standard_normal(rhs_shape).astype(np.float32)
    sizes = rng.integers(0, 3, size=sizes_shape).astype(np.int32)
    text = f"""
ENTRY e {{
  a = f32[{','.join(map(str, lhs_shape))}] parameter(0)
  b = f32[{','.join(map(str, rhs_shape))}] parameter(1)
  g = s32[{','.join(map(str, sizes_shape))}] parameter(2)
  ROOT d = f32[{','.join(map(str, out_shape))}] ragged-dot(a, b, g), {attrs}
}}"""
    numbers = lax.RaggedDotDimensionNumbers(dot_dimension_numbers=dn["dims"], lhs_ragged_dimensions=dn["lhs_ragged"],
                                            rhs_group_dimensions=dn["rhs_group"])
    expected = np.asarray(lax.ragged_dot_general(lhs, rhs, sizes, numbers))
    np.testing.assert_allclose(run(text, lhs, rhs, sizes), expected, rtol=1e-5, atol=1e-5)


def test_scaled_dot_dequantizes_blocks():
    lhs = np.arange(8, dtype=np.float32).reshape(2, 4)
    rhs = np.ones((4, 3), np.float32)
    lhs_scale = np.array([[1, 10], [2, 20]], np.float32)   # blocks of 2 along the contraction
    rhs_scale = np.full((2, 3), 0.5, np.float32)
    text = """
ENTRY e {
  a = f32[2,4] parameter(0)
  b = f32[4,3] parameter(1)
  sa = f32[2,2] parameter(2)
  sb = f32[2,3] parameter(3)
  ROOT d = f32[2,3] scaled-dot(a, b, sa, sb), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}"""
    deq = lhs * np.repeat(lhs_scale, 2, axis=1)
    expected = deq @ (rhs * 0.5)
    np.testing.assert_allclose(run(text, lhs, rhs, lhs_scale, rhs_scale), expected, rtol=1e-6)


# -- convolution ------------------------------------------------------------------------------

def test_convolution_1d_hand_computed():
    text = """
ENTRY e {
  x = f32[1,1,5] parameter(0)
  k = f32[1,1,2] parameter(1)
  ROOT c = f32[1,1,5] convolution(x, k), window={size=2 pad=1_0}, dim_labels=bf0_oi0->bf0
}"""
    x = np.array([[[1, 2, 3, 4, 5]]], np.float32)
    k = np.array([[[10, 1]]], np.float32)
    # padded: 0 1 2 3 4 5 → out[i] = 10*p[i] + p[i+1]
    assert_same_bits(run(text, x, k), np.array([[[1, 12, 23, 34, 45]]], np.float32))


def test_convolution_window_reversal_flips_the_kernel():
    text = """
ENTRY e {
  x = f32[1,1,3] parameter(0)
  k = f32[1,1,2] parameter(1)
  ROOT c = f32[1,1,2] convolution(x, k), window={size=2 rhs_reversal=1}, dim_labels=bf0_oi0->bf0
}"""
    x = np.array([[[1, 2, 3]]], np.float32)
    k = np.array([[[10, 1]]], np.float32)
    # reversed taps [1, 10]: out[i] = x[i] + 10 * x[i+1] (unreversed would give [12, 23])
    assert_same_bits(run(text, x, k), np.array([[[21, 32]]], np.float32))


CONV_CASES = [
    dict(lhs=(2, 3, 8, 8), rhs=(4, 3, 3, 3), strides=(1, 1), padding=((0, 0), (0, 0))),
    dict(lhs=(2, 3, 8, 9), rhs=(4, 3, 3, 2), strides=(2, 1), padding=((1, 0), (2, 2)),
         lhs_dilation=(1, 2), rhs_dilation=(2, 1)),
    dict(lhs=(1, 4, 7, 6), rhs=(6, 2, 2, 3), strides=(1, 2), padding=((-1, 2), (1, 1)), feature_group_count=2),
    dict(lhs=(4, 3, 6, 5), rhs=(6, 3, 3, 2), strides=(1, 1), padding=((1, 1), (0, 1)), batch_group_count=2),
    dict(lhs=(3, 6, 5), rhs=(6, 1, 3), strides=(1,), padding=((2, 0),), feature_group_count=6,
         rhs_dilation=(2,)),
    dict(lhs=(2, 5, 4, 3, 4), rhs=(2, 5, 2, 2, 2), strides=(1, 2, 1), padding=((0, 1), (1, 0), (0, 0))),
]


@pytest.mark.parametrize("case", CONV_CASES)
def test_convolution_matches_jax(case):
    pytest.importorskip("jax")
    from jax import lax

    rng = np.random.default_rng(8)
    case = dict(case)
    x = rng.standard_normal(case.pop("lhs")).astype(np.float32)
    k = rng.standard_normal(case.pop("rhs")).astype(np.float32)
    strides, padding = case.pop("strides"), case.pop("padding")
    ours, theirs = run_jax(lambda a, b: lax.conv_general_dilated(a, b, strides, padding, **case), x, k)
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4)


def test_convolution_nhwc_layout_and_bf16_matches_jax():
    pytest.importorskip("jax")
    from jax import lax

    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 6, 5, 3)).astype(ml_dtypes.bfloat16)
    k = rng.standard_normal((3, 2, 3, 4)).astype(ml_dtypes.bfloat16)
    dn = ("NHWC", "HWIO", "NHWC")
    ours, theirs = run_jax(lambda a, b: lax.conv_general_dilated(
        a, b, (1, 1), "SAME", dimension_numbers=dn, preferred_element_type=np.float32), x, k)
    assert ours.dtype == np.float32
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4)


def test_convolution_integer_wraps():
    text = """
ENTRY e {
  x = s8[1,1,2] parameter(0)
  k = s8[1,1,2] parameter(1)
  ROOT c = s8[1,1,1] convolution(x, k), window={size=2}, dim_labels=bf0_oi0->bf0
}"""
    x = np.array([[[100, 100]]], np.int8)
    k = np.array([[[1, 1]]], np.int8)
    assert_same_bits(run(text, x, k), np.array([[[-56]]], np.int8))  # 200 wraps in s8


def test_convolution_without_window_is_a_matrix_product():
    """`window` is optional (XLA's parser makes it empty): with no spatial dimensions a convolution
    is a product over the feature dimension."""
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(12, dtype=np.float32).reshape(3, 4)
    text = """HloModule m
ENTRY e {
  a = f32[2,3] parameter(0)
  b = f32[3,4] parameter(1)
  ROOT c = f32[2,4] convolution(a, b), dim_labels=bf_io->bf
}"""
    np.testing.assert_array_equal(run(text, a, b), a @ b)
    assert "window" not in hlocc.parse_hlo(text).to_string()
