"""`Executable.__call__`'s steady call (runtime/guarded_call.py): arguments exactly as a cpu program
takes them go straight to its native call, call plan or dynamic binding; every other argument takes
the general path, with its conversions and its errors. Each test calls past the point where the
steady call exists (the native call is built at the second call) and checks the results against
the reference evaluator, and that an argument the guard refuses still gets the checked path's
answer or message."""

from __future__ import annotations

import numpy as np
import pytest

import hlocc
from hlocc.errors import ArgumentError
from hlocc.runtime.guarded_call import guarded_call

STATIC = """HloModule steady_static
ENTRY e {
  x = f32[3,5] parameter(0)
  y = f32[3,5] parameter(1)
  s = f32[3,5] add(x, y)
  ROOT m = f32[3,5] multiply(s, x)
}"""

DYNAMIC = """HloModule steady_dynamic
ENTRY e {
  x = f32[?n,5] parameter(0)
  e = f32[?n,5] exponential(x)
  ROOT t = (f32[?n,5], f32[?n,5]) tuple(e, x)
}"""

# two outputs, one a whole allocation (an array of its own), one a view of a parameter's copy
TWO_OUTPUTS = """HloModule steady_two
ENTRY e {
  x = f32[?n] parameter(0)
  a = f32[?n] negate(x)
  b = f32[?n] exponential(x)
  ROOT t = (f32[?n], f32[?n]) tuple(a, b)
}"""


def _reference(text, *args):
    return hlocc.compile(text, "interpreter")(*args)


def _same(got, want):
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        assert np.asarray(g).shape == np.asarray(w).shape and np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)


@pytest.mark.parametrize("native", ["1", "0"])
def test_static_steady_call_and_what_it_refuses(monkeypatch, native):
    monkeypatch.setenv("HLOCC_NATIVE_CALL", native)
    exe = hlocc.compile(STATIC.replace("steady_static", f"steady_static_{native}"), "cpu")
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal((3, 5)).astype(np.float32) for _ in range(2))
    for _ in range(3):
        _same(exe(x, y), _reference(STATIC, x, y))
    assert callable(exe._steady)
    first, second = exe(x, y), exe(x, y)
    assert first is not second and not np.shares_memory(first, second)  # fresh outputs per call
    # refused by the guard, answered by the checked path: a Fortran-order or strided array
    # copied, a list taken through np.asarray; another dtype and another shape are its errors
    _same(exe(np.asfortranarray(x), y), _reference(STATIC, x, y))
    wide = np.zeros((3, 10), np.float32)
    wide[:, ::2] = x
    _same(exe(wide[:, ::2], y), _reference(STATIC, x, y))
    _same(exe(x.tolist(), y), _reference(STATIC, x, y))
    with pytest.raises(ArgumentError, match=r"argument 0: expected dtype f32 \(float32\), got float64"):
        exe(x.astype(np.float64), y)
    with pytest.raises(ArgumentError, match=r"argument 0: expected shape f32\[3,5\], got an array of shape \[3, 6\]"):
        exe(np.zeros((3, 6), np.float32), y)
    with pytest.raises(ArgumentError):
        exe(x)


def test_dynamic_steady_call_at_bound_and_new_sizes():
    exe = hlocc.compile(DYNAMIC, "cpu")
    rng = np.random.default_rng(1)
    for n in (4, 7, 4, 1, 7, 0, 4):  # new sizes and sizes bound before, in turn
        x = rng.standard_normal((n, 5)).astype(np.float32)
        got = exe(x)
        _same(got, _reference(DYNAMIC, x))
        assert got[1] is not x  # the forwarded parameter is a copy
    assert callable(exe._steady)
    x = rng.standard_normal((4, 5)).astype(np.float32)
    with pytest.raises(ArgumentError, match="got float64"):
        exe(x.astype(np.float64))
    with pytest.raises(ArgumentError, match=r"got an array of shape \[4, 6\]"):
        exe(np.zeros((4, 6), np.float32))  # the fixed dimension


def test_an_output_of_its_own_and_another_output():
    exe = hlocc.compile(TWO_OUTPUTS, "cpu")
    for n in (3, 3, 8, 3):
        x = np.linspace(-1, 1, n, dtype=np.float32)
        a, b = exe(x)
        _same((a, b), _reference(TWO_OUTPUTS, x))
        assert a.flags.c_contiguous and b.flags.c_contiguous and not np.shares_memory(a, b)


def test_guard_source_checks_count_dtype_shape_and_order():
    calls = []
    guard = guarded_call("probe", [np.float32, np.int32], ["calls.append(a0.shape)", "return 1"], {"calls": calls},
                         shapes=[(2,), (3,)], contiguous=True)
    f, i = np.zeros(2, np.float32), np.zeros(3, np.int32)
    assert guard((f, i)) == 1 and calls == [(2,)]
    refused = [(f,), (f, i, i), (f.astype(np.float64), i), (f, i.astype(np.int64)), (np.zeros(3, np.float32), i),
               (np.zeros(4, np.float32)[::2], i), (f.tolist(), i)]
    assert [guard(args) for args in refused] == [None] * len(refused)
    assert calls == [(2,)]
