"""custom-call "TopK" (XLA:CPU's optimized HLO of lax.top_k) and sort with JAX's comparators: the
evaluator's semantics (XLA:CPU's runtime: total order, descending, ties by lower index) and the
cpu backend's sort kernels (codegen/emitters/sort.py), which must agree bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import hlocc
from hlocc.errors import HloVerifyError
from hlocc.evaluator.sorting import comparator_key
from hlocc.hlo.parser import parse_hlo

SPECIALS = np.array([1.5, -0.0, np.nan, -np.inf, 0.0, -np.nan, 2.0, np.inf, -1.0, 0.0, -0.0], np.float32)
# Descending total order, equal keys by index: +NaN, +inf, 2, 1.5, +0 (4), +0 (9), -0 (1), -0 (10), -1, -inf, -NaN.
TOTAL_ORDER_DESCENDING = [2, 7, 6, 0, 4, 9, 1, 10, 8, 3, 5]

TOPK = """HloModule topk
gt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ROOT c = pred[] compare(a, b), direction=GT
}
ENTRY e {
  x = f32[2,11] parameter(0)
  ROOT t = (f32[2,K], s32[2,K]) custom-call(x), custom_call_target="TopK", called_computations={gt}
}"""

# What JAX emits for a descending float sort and XLA:CPU keeps: NaN and -0.0 canonicalised, bits
# mapped to a signed integer in total order, compared LT.
JAX_SORT = """HloModule jax_sort
cmp {
  p0 = f32[] parameter(0)
  p1 = f32[] parameter(1)
  p2 = s32[] parameter(2)
  p3 = s32[] parameter(3)
  nan = f32[] constant(nan)
  zero = f32[] constant(0)
  izero = s32[] constant(0)
  max = s32[] constant(2147483647)
  ne0 = pred[] compare(p0, p0), direction=NE
  ne1 = pred[] compare(p1, p1), direction=NE
  eq0 = pred[] compare(p0, zero), direction=EQ
  eq1 = pred[] compare(p1, zero), direction=EQ
  s0 = f32[] select(eq0, zero, p0)
  s1 = f32[] select(eq1, zero, p1)
  n0 = f32[] select(ne0, nan, s0)
  n1 = f32[] select(ne1, nan, s1)
  b0 = s32[] bitcast(n0)
  b1 = s32[] bitcast(n1)
  x0 = s32[] xor(max, b0)
  x1 = s32[] xor(max, b1)
  l0 = pred[] compare(b0, izero), direction=LT
  l1 = pred[] compare(b1, izero), direction=LT
  k0 = s32[] select(l0, x0, b0)
  k1 = s32[] select(l1, x1, b1)
  ROOT lt = pred[] compare(k0, k1), direction=LT
}
ENTRY e {
  x = f32[2,11] parameter(0)
  iota = s32[2,11] iota(), iota_dimension=1
  ROOT s = (f32[2,11], s32[2,11]) sort(x, iota), dimensions={1}, is_stable=true, to_apply=cmp
}"""


def _both(text: str, *args):
    results = []
    for backend in ("interpreter", "cpu"):
        exe = hlocc.compile(text, backend=backend)
        results.append((exe, exe(*args)))
    return results


@pytest.mark.parametrize("k", [1, 5, 11])
def test_topk_custom_call_orders_like_xla_cpu_runtime(k):
    x = np.stack([SPECIALS, SPECIALS[::-1]])
    (_, ref), (exe, got) = _both(TOPK.replace("K]", f"{k}]"), x)
    # row 1 holds SPECIALS reversed: -0, +0, -1, inf, 2, -NaN, +0, -inf, NaN, -0, 1.5
    expected = np.array([TOTAL_ORDER_DESCENDING[:k], [8, 3, 4, 10, 1, 6, 0, 9, 2, 7, 5][:k]], np.int32)
    for values, indices in (ref, got):
        np.testing.assert_array_equal(indices, expected)
        np.testing.assert_array_equal(values.view(np.int32), np.take_along_axis(x, expected, 1).view(np.int32))
    stats = exe.runner.stats
    assert stats.host_ops == [] and not stats.library_calls and stats.kernels_by_emitter == {"sort": 1}


def test_topk_custom_call_with_a_wrong_result_shape_is_a_verify_error():
    bad = TOPK.replace("(f32[2,K], s32[2,K])", "(f32[2,3], f32[2,3])")
    with pytest.raises(HloVerifyError, match="custom-call 't' to TopK needs"):
        hlocc.compile(bad, backend="interpreter")(np.zeros((2, 11), np.float32))


def test_jax_comparator_is_a_key_comparator_and_sorts_by_total_order():
    found = comparator_key(parse_hlo(JAX_SORT).computations[0])
    assert found is not None and found.operand == 0 and not found.descending
    x = np.stack([SPECIALS, SPECIALS[::-1]])
    (_, ref), (exe, got) = _both(JAX_SORT, x)
    # JAX canonicalises -0.0 to +0.0 and -NaN to +NaN before comparing: they tie with their twins
    order0 = [3, 8, 1, 4, 9, 10, 0, 6, 7, 2, 5]
    for values, indices in (ref, got):
        np.testing.assert_array_equal(indices[0], order0)
        np.testing.assert_array_equal(values.view(np.int32), np.take_along_axis(x, indices, 1).view(np.int32))
        np.testing.assert_array_equal(indices[1], [7, 2, 0, 1, 6, 9, 10, 4, 3, 5, 8])
    assert not exe.runner.stats.library_calls and exe.runner.stats.kernels_by_emitter["sort"] == 1


def test_a_comparator_mixing_both_operands_is_not_a_key_comparator():
    lexicographic = JAX_SORT.replace("ROOT lt = pred[] compare(k0, k1), direction=LT",
                                     "ROOT lt = pred[] compare(k0, p3), direction=LT")
    assert comparator_key(parse_hlo(lexicographic).computations[0]) is None
