"""Hero emitters on symbolic shapes (issue 15, item 5): a fusion whose hero is a dynamic-update-slice
(in place) or a concatenate compiles ONCE into a CPU kernel with runtime dims that runs at every
binding, bit-exact to the reference evaluator on the module specialised there, nothing read or
written outside a buffer in the bounds-checked mode; through `hlocc.compile`, one compilation for
every size and an ArgumentError when a window does not fit its operand at a call's sizes."""

from __future__ import annotations

import numpy as np
import pytest
from test_symbolic_kernels import CHECKED, _check

import hlocc
from hlocc.backends.cpu.kernel import compile_fusion
from hlocc.errors import ArgumentError
from hlocc.hlo.parser import parse_hlo
from hlocc.hlo.specialize import specialize

# a symbolic cache, a static update (the static launch, vectorized), a start past the end (clamped)
DUS_SYMBOLIC_OPERAND = """HloModule m
ENTRY e {
  p0 = f32[?n,8] parameter(0)
  p1 = f32[2,8] parameter(1)
  i = s32[] parameter(2)
  z = s32[] constant(0)
  u = f32[2,8] negate(p1)
  ROOT r = f32[?n,8] dynamic-update-slice(p0, u, i, z)
}"""

# everything symbolic, unsigned starts (a negative test value wraps to a large one: clamped to n-k)
DUS_SYMBOLIC_UPDATE = """HloModule m
ENTRY e {
  p0 = f32[?n,?m] parameter(0)
  p1 = f32[?k,?m] parameter(1)
  i = u32[] parameter(2)
  j = u32[] parameter(3)
  ROOT r = f32[?n,?m] dynamic-update-slice(p0, p1, i, j)
}"""

KV_CACHE = """HloModule kv
ENTRY e {
  cache = f32[?n,16] parameter(0)
  x = f32[?k,16] parameter(1)
  pos = s32[] parameter(2)
  z = s32[] constant(0)
  e = f32[?k,16] exponential(x)
  ROOT r = f32[?n,16] dynamic-update-slice(cache, e, pos, z)
}"""

# two symbolic operand sizes along the concatenated dim, a static third, a symbolic minor dim
CONCATENATE = """HloModule m
ENTRY e {
  a = f32[?b,?n] parameter(0)
  c = f32[?b,3] parameter(1)
  d = f32[?b,?m] parameter(2)
  na = f32[?b,?n] negate(a)
  ROOT r = f32[?b,?(n+m+3)] concatenate(na, c, d), dimensions={1}
}"""

UPDATE_SIZES = [(1, 1, 1), (5, 0, 3), (7, 3, 17), (16, 16, 2), (37, 37, 5), (100, 13, 101)]  # (n, k, m)


def test_dynamic_update_slice_symbolic_operand():
    kernel = _check(DUS_SYMBOLIC_OPERAND, [{"n": n} for n in (2, 3, 7, 16, 17, 101, 1000)])
    assert kernel.emitter == "in_place_dynamic_update_slice" and kernel.symbols == ("n",)
    assert kernel.output_aliases == ((0, 0),)


def test_dynamic_update_slice_symbolic_update():
    kernel = _check(DUS_SYMBOLIC_UPDATE, [{"n": n, "k": k, "m": m} for n, k, m in UPDATE_SIZES])
    assert kernel.emitter == "in_place_dynamic_update_slice" and kernel.symbols == ("k", "m", "n")


def test_dynamic_update_slice_bounds_checked():
    _check(DUS_SYMBOLIC_UPDATE, [{"n": n, "k": k, "m": m} for n, k, m in UPDATE_SIZES[:4]], CHECKED)
    _check(DUS_SYMBOLIC_OPERAND, [{"n": n} for n in (2, 5, 17)], CHECKED)


@pytest.fixture(scope="module")
def kv_cache():
    return hlocc.compile(KV_CACHE, backend="cpu")


def test_kv_cache_update_runs_every_size_with_one_compile(kv_cache):
    rng = np.random.default_rng(0)
    for n, k, pos in [(1, 1, 0), (7, 3, 5), (17, 17, 0), (101, 13, -4), (100, 7, 99), (5, 0, 2)]:
        cache = rng.standard_normal((n, 16)).astype(np.float32)
        x = rng.standard_normal((k, 16)).astype(np.float32)
        special = specialize(parse_hlo(KV_CACHE), {"n": n, "k": k})
        expected = hlocc.compile(special, backend="interpreter")(cache, x, np.int32(pos))
        # the kernel's exp is within an ulp of numpy's
        np.testing.assert_allclose(kv_cache(cache, x, np.int32(pos)), expected, rtol=1e-6)
    assert kv_cache.compilations == 1


def test_update_larger_than_operand_is_an_argument_error(kv_cache):
    with pytest.raises(ArgumentError, match=r"dynamic-update-slice 'r': update dimension 0 \(k = 4\) exceeds "
                                             r"the operand's dimension \(n = 3\)"):
        kv_cache(np.zeros((3, 16), np.float32), np.zeros((4, 16), np.float32), np.int32(0))


def test_symbolic_dynamic_update_slice_is_not_a_fallback():
    """The kernel comes from the in-place emitter, not from the loop emitter's refusal."""
    kernel = compile_fusion(parse_hlo(KV_CACHE).entry)
    assert kernel.emitter == "in_place_dynamic_update_slice"


CONCAT_SIZES = [(1, 1, 1), (0, 3, 2), (3, 0, 0), (7, 17, 5), (2, 16, 16), (37, 1, 101)]  # (b, n, m)


def test_concatenate_of_symbolic_operands():
    kernel = _check(CONCATENATE, [{"b": b, "n": n, "m": m} for b, n, m in CONCAT_SIZES])
    assert kernel.emitter == "loop" and kernel.symbols == ("b", "m", "n")


def test_concatenate_bounds_checked():
    _check(CONCATENATE, [{"b": b, "n": n, "m": m} for b, n, m in CONCAT_SIZES[:4]], CHECKED)
