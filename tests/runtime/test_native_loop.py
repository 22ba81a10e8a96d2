"""A static program's control flow as native functions (runtime/native_loop.py): a loop built at
compile time, its iterations and the predicate's test in machine code, a loop that never runs its
body, one whose body runs a kernel the thread pool shares (not native: the planned Python loop),
nested loops in one function, conditionals on a pred and on an index (out-of-range indices take
the last branch) inside a loop and alone, and concurrent callers. Numerics against the evaluator
(the interpreter backend)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import hlocc
from hlocc.runtime.thunks import ConditionalThunk, WhileThunk

# x doubled and counted up while the counter is below n: n iterations (none for n <= 0)
COUNTED = """HloModule counted

cond {
  s = (s32[], s32[], f32[DIM]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] get-tuple-element(s), index=1
  ROOT lt = pred[] compare(i, n), direction=LT
}

body {
  s = (s32[], s32[], f32[DIM]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] get-tuple-element(s), index=1
  x = f32[DIM] get-tuple-element(s), index=2
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  half = f32[] constant(0.5)
  h = f32[DIM] broadcast(half), dimensions={}
  y = f32[DIM] multiply(x, x)
  z = f32[DIM] add(y, h)
  ROOT t = (s32[], s32[], f32[DIM]) tuple(i1, n, z)
}

ENTRY main {
  n = s32[] parameter(0)
  x = f32[DIM] parameter(1)
  zero = s32[] constant(0)
  init = (s32[], s32[], f32[DIM]) tuple(zero, n, x)
  w = (s32[], s32[], f32[DIM]) while(init), condition=cond, body=body
  r = f32[DIM] get-tuple-element(w), index=2
  c = s32[] get-tuple-element(w), index=0
  ROOT out = (f32[DIM], s32[]) tuple(r, c)
}
"""


def _control(exe) -> list[WhileThunk | ConditionalThunk]:
    return [t for t in exe.runner.program.walk() if isinstance(t, (WhileThunk, ConditionalThunk))]


@pytest.mark.parametrize("n", [-3, 0, 1, 7])
def test_a_counted_loop_runs_natively(n):
    text = COUNTED.replace("DIM", "5")
    exe = hlocc.compile(text, "cpu")
    [loop] = _control(exe)
    assert loop.native is not None and loop.native.used  # built at compile time
    x = np.linspace(-0.3, 0.3, 5, dtype=np.float32)
    got, count = exe(np.int32(n), x)
    want, want_count = hlocc.compile(text, "interpreter")(np.int32(n), x)
    assert int(count) == max(n, 0) == int(want_count)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_a_loop_whose_kernel_the_pool_shares_is_not_native():
    text = COUNTED.replace("DIM", str(1 << 20))
    exe = hlocc.compile(text, "cpu")
    [loop] = _control(exe)
    assert loop.native is None  # the body's kernel runs over the thread pool: the planned loop
    x = np.linspace(-0.3, 0.3, 1 << 20, dtype=np.float32)
    got, count = exe(np.int32(3), x)
    want, _ = hlocc.compile(text, "interpreter")(np.int32(3), x)
    assert int(count) == 3
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_nested_loops_run_as_one_function():
    text = """HloModule nested

inner_cond {
  s = (s32[], s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] get-tuple-element(s), index=1
  ROOT lt = pred[] compare(i, n), direction=LT
}

inner_body {
  s = (s32[], s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] get-tuple-element(s), index=1
  x = f32[4] get-tuple-element(s), index=2
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  c = f32[] constant(1.5)
  b = f32[4] broadcast(c), dimensions={}
  y = f32[4] add(x, b)
  ROOT t = (s32[], s32[], f32[4]) tuple(i1, n, y)
}

outer_cond {
  s = (s32[], f32[4]) parameter(0)
  j = s32[] get-tuple-element(s), index=0
  three = s32[] constant(3)
  ROOT lt = pred[] compare(j, three), direction=LT
}

outer_body {
  s = (s32[], f32[4]) parameter(0)
  j = s32[] get-tuple-element(s), index=0
  x = f32[4] get-tuple-element(s), index=1
  zero = s32[] constant(0)
  init = (s32[], s32[], f32[4]) tuple(zero, j, x)
  w = (s32[], s32[], f32[4]) while(init), condition=inner_cond, body=inner_body
  y = f32[4] get-tuple-element(w), index=2
  two = f32[] constant(2)
  b = f32[4] broadcast(two), dimensions={}
  z = f32[4] multiply(y, b)
  one = s32[] constant(1)
  j1 = s32[] add(j, one)
  ROOT t = (s32[], f32[4]) tuple(j1, z)
}

ENTRY main {
  x = f32[4] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[4]) tuple(zero, x)
  w = (s32[], f32[4]) while(init), condition=outer_cond, body=outer_body
  ROOT r = f32[4] get-tuple-element(w), index=1
}
"""
    exe = hlocc.compile(text, "cpu")
    outer, inner_loop = _control(exe)
    assert outer.native is not None and inner_loop.native is False  # inside the outer one's function
    x = np.array([0.0, 1.0, -2.0, 0.25], np.float32)
    np.testing.assert_array_equal(np.asarray(exe(x)), np.asarray(hlocc.compile(text, "interpreter")(x)))


def test_concurrent_callers_each_run_their_own_loop():
    text = COUNTED.replace("DIM", "16")
    exe = hlocc.compile(text, "cpu")
    xs = [np.full(16, k / 64, np.float32) for k in range(8)]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda k: exe(np.int32(k), xs[k]), range(8)))
    reference = hlocc.compile(text, "interpreter")
    for k, (got, count) in enumerate(results):
        want, _ = reference(np.int32(k), xs[k])
        assert int(count) == k
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


# a conditional on an index inside a loop: branch i mod 4 of three (3 and any other index: the last)
SWITCHED = """HloModule switched

b0 {
  x = f32[6] parameter(0)
  ROOT y = f32[6] negate(x)
}

b1 {
  x = f32[6] parameter(0)
  c = f32[] constant(0.5)
  b = f32[6] broadcast(c), dimensions={}
  ROOT y = f32[6] multiply(x, b)
}

b2 {
  x = f32[6] parameter(0)
  c = f32[] constant(1)
  b = f32[6] broadcast(c), dimensions={}
  ROOT y = f32[6] add(x, b)
}

cond {
  s = (s32[], f32[6]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(9)
  ROOT lt = pred[] compare(i, n), direction=LT
}

body {
  s = (s32[], f32[6]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[6] get-tuple-element(s), index=1
  four = s32[] constant(4)
  k = s32[] remainder(i, four)
  y = f32[6] conditional(k, x, x, x), branch_computations={b0, b1, b2}
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT t = (s32[], f32[6]) tuple(i1, y)
}

ENTRY main {
  x = f32[6] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[6]) tuple(zero, x)
  w = (s32[], f32[6]) while(init), condition=cond, body=body
  ROOT r = f32[6] get-tuple-element(w), index=1
}
"""


def test_a_switch_inside_a_loop_runs_natively():
    exe = hlocc.compile(SWITCHED, "cpu")
    loop, switch = _control(exe)
    assert loop.native is not None and switch.native is False
    x = np.array([0.0, 1.0, -2.0, 0.25, 3.0, -0.5], np.float32)
    np.testing.assert_array_equal(np.asarray(exe(x)), np.asarray(hlocc.compile(SWITCHED, "interpreter")(x)))


@pytest.mark.parametrize("selector", ["s32[] parameter(0)", "pred[] parameter(0)"])
def test_a_conditional_alone_runs_natively(selector):
    pred = selector.startswith("pred")
    text = f"""HloModule alone

b0 {{
  x = f32[6] parameter(0)
  ROOT y = f32[6] negate(x)
}}

b1 {{
  x = f32[6] parameter(0)
  ROOT y = f32[6] exponential(x)
}}

b2 {{
  x = f32[6] parameter(0)
  ROOT y = f32[6] abs(x)
}}

ENTRY main {{
  k = {selector}
  x = f32[6] parameter(1)
  ROOT y = f32[6] conditional(k, x, x{"" if pred else ", x"}), {"true_computation=b0, false_computation=b1" if pred else "branch_computations={b0, b1, b2}"}
}}
"""
    exe = hlocc.compile(text, "cpu")
    [switch] = _control(exe)
    assert switch.native is not None
    reference = hlocc.compile(text, "interpreter")
    x = np.array([0.0, 1.0, -2.0, 0.25, 3.0, -0.5], np.float32)
    for k in ([True, False] if pred else [-1, 0, 1, 2, 3, 7]):
        selector_value = np.bool_(k) if pred else np.int32(k)
        np.testing.assert_array_equal(np.asarray(exe(selector_value, x)), np.asarray(reference(selector_value, x)))
