"""sort (fast and merge-sort paths) and topk in the reference evaluator."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from _compute_helpers import assert_same_bits, run, run_jax


def sort_module(shape: str, direction: str, compare_type: str = "", dim: int = 0, ktype: str = "f32",
                swap: bool = False, wrap: bool = False) -> str:
    """A one-operand sort whose comparator is compare(p0, p1) (or (p1, p0) when `swap`);
    `wrap` adds a no-op so the fast path does not recognise it."""
    type_attr = f", type={compare_type}" if compare_type else ""
    lhs, rhs = ("b", "a") if swap else ("a", "b")
    body = (f"c = pred[] compare({lhs}, {rhs}), direction={direction}{type_attr}\n  ROOT r = pred[] copy(c)"
            if wrap else f"ROOT r = pred[] compare({lhs}, {rhs}), direction={direction}{type_attr}")
    return f"""
cmp {{ a = {ktype}[] parameter(0)
  b = {ktype}[] parameter(1)
  {body} }}
ENTRY e {{
  p = {ktype}{shape} parameter(0)
  ROOT s = {ktype}{shape} sort(p), dimensions={{{dim}}}, is_stable=true, to_apply=cmp
}}"""


SPECIALS = np.array([1.5, -0.0, np.nan, -np.inf, 0.0, -np.nan, 2.0, np.inf, -1.0, 0.0, -0.0], np.float32)


@pytest.mark.parametrize("wrap", [False, True])
def test_sort_totalorder_places_nans_and_signed_zeros(wrap):
    out = run(sort_module("[11]", "LT", "TOTALORDER", wrap=wrap), SPECIALS)
    expected = np.array([-np.nan, -np.inf, -1.0, -0.0, -0.0, 0.0, 0.0, 1.5, 2.0, np.inf, np.nan], np.float32)
    assert_same_bits(out, expected)


@pytest.mark.parametrize("wrap", [False, True])
def test_sort_float_compare_keeps_signed_zeros_in_input_order(wrap):
    x = np.array([0.0, -0.0, 1.0, -0.0, 0.0, -2.0], np.float32)
    out = run(sort_module("[6]", "LT", wrap=wrap), x)
    assert_same_bits(out, np.array([-2.0, 0.0, -0.0, -0.0, 0.0, 1.0], np.float32))


@pytest.mark.parametrize("wrap", [False, True])
@pytest.mark.parametrize("direction,swap", [("GT", False), ("LT", True)])
def test_sort_descending_is_stable(direction, swap, wrap):
    # Two-operand sort: keys with ties, payload = original index; ties keep input order.
    keys = np.array([[3, 1, 3, 2, 1, 3], [0, 0, 0, 0, 0, 0]], np.int32)
    payload = np.broadcast_to(np.arange(6, dtype=np.int32), (2, 6)).copy()
    lhs, rhs = ("b", "a") if swap else ("a", "b")
    compare = f"pred[] compare({lhs}, {rhs}), direction={direction}"
    cmp_root = f"c = {compare}\n  ROOT r = pred[] copy(c)" if wrap else f"ROOT r = {compare}"
    text = f"""
cmp {{ a = s32[] parameter(0)
  b = s32[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  {cmp_root} }}
ENTRY e {{
  k = s32[2,6] parameter(0)
  v = s32[2,6] parameter(1)
  ROOT s = (s32[2,6], s32[2,6]) sort(k, v), dimensions={{1}}, is_stable=true, to_apply=cmp
}}"""
    sorted_keys, order = run(text, keys, payload)
    assert_same_bits(sorted_keys, np.array([[3, 3, 3, 2, 1, 1], [0] * 6], np.int32))
    assert_same_bits(order, np.array([[0, 2, 5, 3, 1, 4], [0, 1, 2, 3, 4, 5]], np.int32))


@pytest.mark.parametrize("n", [1, 2, 5, 16, 33])
def test_merge_sort_matches_numpy_on_odd_sizes(n):
    x = np.random.default_rng(n).integers(-20, 20, size=(3, n)).astype(np.int32)
    out = run(sort_module(f"[3,{n}]", "LT", dim=1, ktype="s32", wrap=True), x)
    assert_same_bits(out, np.sort(x, axis=1, kind="stable"))


def test_sort_along_leading_dimension_bf16():
    x = np.random.default_rng(10).standard_normal((9, 4)).astype(ml_dtypes.bfloat16)
    out = run(sort_module("[9,4]", "GT", ktype="bf16", dim=0), x)
    assert_same_bits(out, -np.sort(-x.astype(np.float32), axis=0).astype(ml_dtypes.bfloat16))


@pytest.mark.parametrize("num_keys", [1, 2])
def test_sort_matches_jax_multi_operand(num_keys):
    pytest.importorskip("jax")
    from jax import lax

    rng = np.random.default_rng(11)
    a = rng.integers(0, 3, size=(4, 13)).astype(np.float32)
    a[0, 3], a[1, 5], a[2, 0] = np.nan, -0.0, -np.nan
    b = rng.integers(0, 3, size=(4, 13)).astype(np.int32)
    c = rng.standard_normal((4, 13)).astype(np.float32)
    ours, theirs = run_jax(lambda x, y, z: lax.sort((x, y, z), dimension=1, num_keys=num_keys), a, b, c)
    for o, t in zip(ours, theirs):
        assert_same_bits(o, t)


def test_topk_matches_jax_and_breaks_ties_by_index():
    pytest.importorskip("jax")
    from jax import lax

    x = np.random.default_rng(12).integers(0, 4, size=(3, 10)).astype(np.float32)
    text = """
ENTRY e {
  p = f32[3,10] parameter(0)
  ROOT t = (f32[3,4], s32[3,4]) topk(p), k=4, largest=true
}"""
    values, indices = run(text, x)
    jv, ji = lax.top_k(x, 4)
    assert_same_bits(values, np.asarray(jv))
    assert_same_bits(indices, np.asarray(ji))


def test_topk_smallest():
    text = """
ENTRY e {
  p = f32[6] parameter(0)
  ROOT t = (f32[3], s32[3]) topk(p), k=3, largest=false
}"""
    values, indices = run(text, np.array([4, 1, 3, 1, np.nan, 0], np.float32))
    assert_same_bits(values, np.array([0, 1, 1], np.float32))
    assert_same_bits(indices, np.array([5, 1, 3], np.int32))


def test_merge_sort_is_stable_property():
    hypothesis = pytest.importorskip("hypothesis")
    from hypothesis import given, settings
    from hypothesis import strategies as st

    text_for = {}

    def module(n):
        if n not in text_for:
            text_for[n] = f"""
cmp {{ a = s32[] parameter(0)
  b = s32[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  c = pred[] compare(a, b), direction=LT
  ROOT r = pred[] copy(c) }}
ENTRY e {{
  k = s32[{n}] parameter(0)
  v = s32[{n}] parameter(1)
  ROOT s = (s32[{n}], s32[{n}]) sort(k, v), dimensions={{0}}, is_stable=true, to_apply=cmp
}}"""
        return text_for[n]

    @settings(max_examples=40, deadline=None)
    @given(st.lists(st.integers(-3, 3), min_size=0, max_size=40))
    def check(keys):
        keys = np.array(keys, np.int32)
        index = np.arange(keys.size, dtype=np.int32)
        sorted_keys, order = run(module(keys.size), keys, index)
        expected = np.argsort(keys, kind="stable").astype(np.int32)
        assert_same_bits(order, expected)
        assert_same_bits(sorted_keys, keys[expected])

    del hypothesis
    check()


def test_sort_comparator_bitcasting_floats_to_ints():
    """XLA's optimized modules compare float keys through `s32[] bitcast(f32[])` in a comparator
    (complex numbers' total order), which the evaluator calls on whole arrays: the bitcast of a
    scalar instruction got an array and failed ("axes don't match array"), on the interpreter and
    in the cpu backend's sort call. (A comparator of one key takes another path.)"""
    import hlocc

    text = """HloModule sort_bits
by_bits {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ai = s32[] bitcast(a)
  bi = s32[] bitcast(b)
  lt = pred[] compare(ai, bi), direction=LT
  eq = pred[] compare(ai, bi), direction=EQ
  later = pred[] compare(i, j), direction=GT
  tie = pred[] and(eq, later)
  ROOT r = pred[] or(lt, tie)
}
ENTRY e {
  x = f32[9] parameter(0)
  i = s32[9] parameter(1)
  ROOT s = (f32[9], s32[9]) sort(x, i), dimensions={0}, to_apply=by_bits
}"""
    x = np.array([3, -1, 0.5, -0.0, 3, 7, -1, 1e-3, -5], np.float32)
    index = np.arange(9, dtype=np.int32)
    order = np.lexsort((-index, x.view(np.int32)))  # by the bits, ties by the later index first
    for backend in ("interpreter", "cpu"):
        values, indices = hlocc.compile(text, backend)(x, index)
        assert_same_bits(values, x[order])
        assert_same_bits(indices, index[order])
