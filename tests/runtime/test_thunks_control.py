"""The thunk runtime's control flow on whole programs, against the interpreter: while (tuple,
array, pred and nested state, swaps, aliased initial values, nested loops, zero trips),
conditional (pred, index, out-of-range indices, branch roots that are parameters or constants),
flattened shared computations, call with one and two call sites. Every run's memory starts as
poison (see _thunk_helpers.py)."""

from __future__ import annotations

import numpy as np
import pytest
from _thunk_helpers import (  # noqa: F401  (poisoned_memory: an autouse fixture)
    BOTH_PIPELINES,
    POISON,
    assert_close,
    assert_exact,
    check_exact,
    host_opcodes,
    leaves,
    poisoned_memory,
    random_array,
    run_both,
    thunk_kinds,
)

import hlocc

# -- while -----------------------------------------------------------------------------------------

COUNTED_LOOP = """HloModule loop
cond {
  s = (s32[], s32[8], s32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(TRIPS)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], s32[8], s32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  a = s32[8] get-tuple-element(s), index=1
  b = s32[8] get-tuple-element(s), index=2
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  NEXT
}
ENTRY e {
  a = s32[8] parameter(0)
  b = s32[8] parameter(1)
  z = s32[] constant(0)
  t = (s32[], s32[8], s32[8]) tuple(z, a, b)
  ROOT w = (s32[], s32[8], s32[8]) while(t), condition=cond, body=body
}"""

SWAP = "ROOT t = (s32[], s32[8], s32[8]) tuple(i2, b, a)"
FIBONACCI = "ab = s32[8] add(a, b)\n  ROOT t = (s32[], s32[8], s32[8]) tuple(i2, b, ab)"
ROTATE_AND_DOUBLE = ("ra = s32[8] reverse(a), dimensions={0}\n  ones = s32[8] broadcast(one), dimensions={}\n"
                     "  b2 = s32[8] shift-left(b, ones)\n  ROOT t = (s32[], s32[8], s32[8]) tuple(i2, b2, ra)")

A8 = np.arange(8, dtype=np.int32)
B8 = np.arange(100, 108, dtype=np.int32)


@BOTH_PIPELINES
@pytest.mark.parametrize("trips", [0, 1, 2, 5])
def test_while_swapping_state_elements(trips, hlo_passes):
    # Each iteration's root is (i+1, b, a): copying a into b's buffer and then b into a's would
    # lose a; the boundary copies must go through a scratch buffer.
    text = COUNTED_LOOP.replace("TRIPS", str(trips)).replace("NEXT", SWAP)
    exe, got = check_exact(text, A8, B8, hlo_passes=hlo_passes)
    i, a, b = got
    assert int(i) == trips
    np.testing.assert_array_equal(a, B8 if trips % 2 else A8)
    np.testing.assert_array_equal(b, A8 if trips % 2 else B8)
    assert not exe.runner.stats.host_ops
    # Swapping two 32-byte buffers takes at least three copies at the end of every iteration.
    (loop,) = [t for t in exe.runner.program.walk() if t.kind == "while"]
    assert len([t for t in loop.body.walk() if t.kind == "copy" and t.source.size == 32]) >= 3


@BOTH_PIPELINES
@pytest.mark.parametrize("next_state", [FIBONACCI, ROTATE_AND_DOUBLE], ids=["fibonacci", "rotate_and_double"])
def test_while_state_elements_that_read_each_other(next_state, hlo_passes):
    text = COUNTED_LOOP.replace("TRIPS", "6").replace("NEXT", next_state)
    _, (i, a, b) = check_exact(text, A8, B8, hlo_passes=hlo_passes)
    assert int(i) == 6
    x, y = A8.copy(), B8.copy()
    for _ in range(6):
        x, y = (y, x + y) if next_state == FIBONACCI else (y << 1, x[::-1])
    np.testing.assert_array_equal(a, x)
    np.testing.assert_array_equal(b, y)


def test_while_result_is_independent_of_the_arguments():
    text = COUNTED_LOOP.replace("TRIPS", "3").replace("NEXT", SWAP)
    exe = hlocc.compile(text, backend="cpu")
    a, b = A8.copy(), B8.copy()
    _, ra, rb = exe(a, b)
    np.testing.assert_array_equal(a, A8)
    np.testing.assert_array_equal(b, B8)
    assert not np.shares_memory(ra, a) and not np.shares_memory(ra, b) and not np.shares_memory(rb, a)


LIMIT_FROM_BEFORE_THE_LOOP = """HloModule limit
add {
  x = s32[] parameter(0)
  y = s32[] parameter(1)
  ROOT s = s32[] add(x, y)
}
cond {
  s = (s32[], s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] get-tuple-element(s), index=1
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] get-tuple-element(s), index=1
  x = f32[4] get-tuple-element(s), index=2
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  x2 = f32[4] add(x, x)
  ROOT t = (s32[], s32[], f32[4]) tuple(i2, n, x2)
}
ENTRY e {
  counts = s32[3] parameter(0)
  x = f32[4] parameter(1)
  zero = s32[] constant(0)
  n = s32[] reduce(counts, zero), dimensions={0}, to_apply=add
  t = (s32[], s32[], f32[4]) tuple(zero, n, x)
  w = (s32[], s32[], f32[4]) while(t), condition=cond, body=body
  i = s32[] get-tuple-element(w), index=0
  x3 = f32[4] get-tuple-element(w), index=2
  ROOT r = (s32[], f32[4], s32[]) tuple(i, x3, n)
}"""


@BOTH_PIPELINES
@pytest.mark.parametrize("counts", [[1, 2, 0], [0, 0, 0], [-3, 1, 1]], ids=["three", "zero", "negative"])
def test_while_condition_reads_a_value_computed_before_the_loop(counts, hlo_passes):
    # n = sum(counts) is computed in the entry, threaded through the state unchanged, read by the
    # condition every iteration, and read again by the entry after the loop.
    x = np.array([1, -2, 0.5, 3], np.float32)
    _, (i, x_out, n) = check_exact(LIMIT_FROM_BEFORE_THE_LOOP, np.array(counts, np.int32), x, hlo_passes=hlo_passes)
    trips = max(0, sum(counts))
    assert int(i) == trips and int(n) == sum(counts)
    np.testing.assert_array_equal(x_out, x * 2.0 ** trips)


PREDICATE_IN_STATE = """HloModule pred_state
cond {
  s = (pred[], s32[4]) parameter(0)
  ROOT go = pred[] get-tuple-element(s), index=0
}
body {
  s = (pred[], s32[4]) parameter(0)
  x = s32[4] get-tuple-element(s), index=1
  one = s32[4] constant({1, 1, 1, 1})
  x2 = s32[4] add(x, one)
  ten = s32[] constant(10)
  first = s32[1] slice(x2), slice={[0:1]}
  f = s32[] reshape(first)
  go = pred[] compare(f, ten), direction=LT
  ROOT t = (pred[], s32[4]) tuple(go, x2)
}
ENTRY e {
  go = pred[] parameter(0)
  x = s32[4] parameter(1)
  t = (pred[], s32[4]) tuple(go, x)
  ROOT w = (pred[], s32[4]) while(t), condition=cond, body=body
}"""


@BOTH_PIPELINES
@pytest.mark.parametrize("go", [True, False])
def test_while_condition_is_a_state_element(go, hlo_passes):
    x = np.array([3, 0, -1, 7], np.int32)
    _, (done, out) = check_exact(PREDICATE_IN_STATE, np.bool_(go), x, hlo_passes=hlo_passes)
    assert not done
    np.testing.assert_array_equal(out, x + 7 if go else x)


LOOP = """HloModule loop
cond {
  s = @STATE@ parameter(0)
  @CONDITION@
}
body {
  s = @STATE@ parameter(0)
  @BODY@
}
ENTRY e {
  @ENTRY@
}"""

STATE3 = "(s32[], s32[4], s32[4])"
THREE_TRIPS = """i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT"""
ADD_COUNTER_TO_FIRST = """i = s32[] get-tuple-element(s), index=0
  a = s32[4] get-tuple-element(s), index=1
  b = s32[4] get-tuple-element(s), index=2
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ib = s32[4] broadcast(i2), dimensions={}
  a2 = s32[4] add(a, ib)
  ROOT t = (s32[], s32[4], s32[4]) tuple(i2, a2, b)"""
ADD_SECOND_AND_RESET_IT = """i = s32[] get-tuple-element(s), index=0
  a = s32[4] get-tuple-element(s), index=1
  b = s32[4] get-tuple-element(s), index=2
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  c = s32[4] constant({9, 8, 7, 6})
  a2 = s32[4] add(a, b)
  ROOT t = (s32[], s32[4], s32[4]) tuple(i2, a2, c)"""

LOOP_CASES = {
    # The same value twice in the initial state: the body updates one copy only.
    "same_value_twice_in_the_init": (STATE3, THREE_TRIPS, ADD_COUNTER_TO_FIRST, """x = s32[4] parameter(0)
  z = s32[] constant(0)
  t = (s32[], s32[4], s32[4]) tuple(z, x, x)
  ROOT w = (s32[], s32[4], s32[4]) while(t), condition=cond, body=body"""),
    # Parameters that start the loop are read again after it: the loop works on copies.
    "parameters_read_after_the_loop": (STATE3, THREE_TRIPS, ADD_COUNTER_TO_FIRST, """x = s32[4] parameter(0)
  y = s32[4] parameter(1)
  z = s32[] constant(0)
  t = (s32[], s32[4], s32[4]) tuple(z, x, y)
  w = (s32[], s32[4], s32[4]) while(t), condition=cond, body=body
  a = s32[4] get-tuple-element(w), index=1
  ROOT r = (s32[4], s32[4], s32[4]) tuple(a, x, y)"""),
    # A temporary that starts the loop twice is read again after it.
    "temporary_read_after_the_loop": (STATE3, THREE_TRIPS, ADD_COUNTER_TO_FIRST, """x = s32[4] parameter(0)
  y = s32[4] negate(x)
  z = s32[] constant(0)
  t = (s32[], s32[4], s32[4]) tuple(z, y, y)
  w = (s32[], s32[4], s32[4]) while(t), condition=cond, body=body
  a = s32[4] get-tuple-element(w), index=1
  b = s32[4] get-tuple-element(w), index=2
  s = s32[4] add(a, y)
  ROOT r = (s32[4], s32[4], s32[4]) tuple(s, b, y)"""),
    # Constants start the state and are the body's new state: the constants must stay intact.
    "constants_in_the_init_and_the_body_root": (STATE3, THREE_TRIPS, ADD_SECOND_AND_RESET_IT, """x = s32[4] parameter(0)
  z = s32[] constant(0)
  c = s32[4] constant({1, 1, 1, 1})
  t = (s32[], s32[4], s32[4]) tuple(z, x, c)
  w = (s32[], s32[4], s32[4]) while(t), condition=cond, body=body
  ROOT r = (s32[4], (s32[], s32[4], s32[4])) tuple(c, w)"""),
    "array_state": ("s32[4]", """sl = s32[1] slice(s), slice={[0:1]}
  v = s32[] reshape(sl)
  n = s32[] constant(50)
  ROOT lt = pred[] compare(v, n), direction=LT""", """two = s32[4] constant({2, 2, 2, 2})
  ROOT m = s32[4] multiply(s, two)""", """x = s32[4] parameter(0)
  ROOT w = s32[4] while(x), condition=cond, body=body"""),
    "pred_state_is_the_predicate": ("pred[]", "ROOT p = pred[] copy(s)", "ROOT n = pred[] not(s)", """x = s32[4] parameter(0)
  z = s32[4] constant({0, 0, 0, 0})
  any = pred[4] compare(x, z), direction=GT
  f = pred[] constant(false)
  or = pred[] reduce(any, f), dimensions={0}, to_apply=lor
  ROOT w = pred[] while(or), condition=cond, body=body"""),
    "nested_tuple_state": ("(s32[], (s32[4], s32[4]))", THREE_TRIPS, """i = s32[] get-tuple-element(s), index=0
  ab = (s32[4], s32[4]) get-tuple-element(s), index=1
  a = s32[4] get-tuple-element(ab), index=0
  b = s32[4] get-tuple-element(ab), index=1
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  a2 = s32[4] add(a, b)
  ba = (s32[4], s32[4]) tuple(b, a2)
  ROOT t = (s32[], (s32[4], s32[4])) tuple(i2, ba)""", """x = s32[4] parameter(0)
  z = s32[] constant(0)
  ab = (s32[4], s32[4]) tuple(x, x)
  t = (s32[], (s32[4], s32[4])) tuple(z, ab)
  ROOT w = (s32[], (s32[4], s32[4])) while(t), condition=cond, body=body"""),
    "body_root_is_its_parameter": (STATE3, "ROOT f = pred[] constant(false)", "", """x = s32[4] parameter(0)
  z = s32[] constant(0)
  t = (s32[], s32[4], s32[4]) tuple(z, x, x)
  ROOT w = (s32[], s32[4], s32[4]) while(t), condition=cond, body=body"""),
}


@BOTH_PIPELINES
@pytest.mark.parametrize("name", LOOP_CASES)
def test_while_state_aliasing(name, hlo_passes):
    state, condition, body, entry = LOOP_CASES[name]
    text = (LOOP.replace("@STATE@", state).replace("@CONDITION@", condition).replace("@BODY@", body)
            .replace("@ENTRY@", entry))
    if "to_apply=lor" in text:
        text = text.replace("cond {", "lor {\n  a = pred[] parameter(0)\n  b = pred[] parameter(1)\n"
                            "  ROOT o = pred[] or(a, b)\n}\ncond {")
    x = np.array([1, 2, 3, 4], np.int32)
    args = (x, x + 10) if "y = s32[4] parameter(1)" in text else (x,)
    check_exact(text, *args, hlo_passes=hlo_passes)
    np.testing.assert_array_equal(x, [1, 2, 3, 4])

NESTED_LOOPS = """HloModule nested
inner_cond {
  s = (s32[], s32[], s32[3]) parameter(0)
  j = s32[] get-tuple-element(s), index=0
  limit = s32[] get-tuple-element(s), index=1
  ROOT lt = pred[] compare(j, limit), direction=LT
}
inner_body {
  s = (s32[], s32[], s32[3]) parameter(0)
  j = s32[] get-tuple-element(s), index=0
  limit = s32[] get-tuple-element(s), index=1
  acc = s32[3] get-tuple-element(s), index=2
  one = s32[] constant(1)
  j2 = s32[] add(j, one)
  jb = s32[3] broadcast(j), dimensions={}
  acc2 = s32[3] add(acc, jb)
  ROOT t = (s32[], s32[], s32[3]) tuple(j2, limit, acc2)
}
outer_cond {
  s = (s32[], s32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(4)
  ROOT lt = pred[] compare(i, n), direction=LT
}
outer_body {
  s = (s32[], s32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  acc = s32[3] get-tuple-element(s), index=1
  zero = s32[] constant(0)
  t0 = (s32[], s32[], s32[3]) tuple(zero, i, acc)
  inner = (s32[], s32[], s32[3]) while(t0), condition=inner_cond, body=inner_body
  acc2 = s32[3] get-tuple-element(inner), index=2
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  rev = s32[3] reverse(acc2), dimensions={0}
  ROOT t = (s32[], s32[3]) tuple(i2, rev)
}
ENTRY e {
  x = s32[3] parameter(0)
  zero = s32[] constant(0)
  t = (s32[], s32[3]) tuple(zero, x)
  w = (s32[], s32[3]) while(t), condition=outer_cond, body=outer_body
  ROOT acc = s32[3] get-tuple-element(w), index=1
}"""


@BOTH_PIPELINES
def test_nested_while_loops(hlo_passes):
    x = np.array([100, 200, 300], np.int32)
    exe, got = check_exact(NESTED_LOOPS, x, hlo_passes=hlo_passes)
    # Outer iteration i adds 0 + 1 + ... + (i-1) to every element, then reverses.
    acc = x.copy()
    for i in range(4):
        acc = (acc + i * (i - 1) // 2)[::-1]
    np.testing.assert_array_equal(got, acc)
    assert thunk_kinds(exe).count("while") == 2


# -- conditional and call --------------------------------------------------------------------------

PRED_CONDITIONAL = """HloModule cond_pred
on_true {
  t = (f32[4], s32[4]) parameter(0)
  x = f32[4] get-tuple-element(t), index=0
  ROOT n = f32[4] negate(x)
}
on_false {
  t = s32[4] parameter(0)
  c = f32[4] convert(t)
  ROOT r = f32[4] reverse(c), dimensions={0}
}
ENTRY e {
  p = pred[] parameter(0)
  x = f32[4] parameter(1)
  y = s32[4] parameter(2)
  xy = (f32[4], s32[4]) tuple(x, y)
  ROOT r = f32[4] conditional(p, xy, y), true_computation=on_true, false_computation=on_false
}"""


@BOTH_PIPELINES
@pytest.mark.parametrize("p", [True, False])
def test_conditional_on_pred(p, hlo_passes):
    x = np.array([1.5, -2, 0, 4], np.float32)
    y = np.array([7, 8, 9, -10], np.int32)
    exe, got = check_exact(PRED_CONDITIONAL, np.bool_(p), x, y, hlo_passes=hlo_passes)
    np.testing.assert_array_equal(got, -x if p else y[::-1].astype(np.float32))
    assert "conditional" in thunk_kinds(exe)


INDEX_CONDITIONAL = """HloModule cond_index
b0 {
  x = s32[4] parameter(0)
  k = s32[] constant(0)
  ROOT r = (s32[4], s32[]) tuple(x, k)
}
b1 {
  x = s32[4] parameter(0)
  d = s32[4] add(x, x)
  k = s32[] constant(1)
  ROOT r = (s32[4], s32[]) tuple(d, k)
}
b2 {
  x = s32[4] parameter(0)
  r = s32[4] reverse(x), dimensions={0}
  k = s32[] constant(2)
  ROOT t = (s32[4], s32[]) tuple(r, k)
}
ENTRY e {
  i = s32[] parameter(0)
  x = s32[4] parameter(1)
  ROOT c = (s32[4], s32[]) conditional(i, x, x, x), branch_computations={b0, b1, b2}
}"""


@BOTH_PIPELINES
@pytest.mark.parametrize("index,branch", [(0, 0), (1, 1), (2, 2), (3, 2), (1000, 2), (-1, 2), (-2**31, 2)])
def test_conditional_on_index(index, branch, hlo_passes):
    """An index outside [0, 3), negative ones included, runs the last branch."""
    x = np.array([5, -6, 7, 8], np.int32)
    exe, (out, taken) = check_exact(INDEX_CONDITIONAL, np.int32(index), x, hlo_passes=hlo_passes)
    assert int(taken) == branch
    np.testing.assert_array_equal(out, [x, 2 * x, x[::-1]][branch])


CONDITIONAL_IN_LOOP = """HloModule cond_loop
even {
  x = s32[4] parameter(0)
  one = s32[4] constant({1, 1, 1, 1})
  ROOT a = s32[4] add(x, one)
}
odd {
  x = s32[4] parameter(0)
  ROOT r = s32[4] reverse(x), dimensions={0}
}
cond {
  s = (s32[], s32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], s32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = s32[4] get-tuple-element(s), index=1
  two = s32[] constant(2)
  parity = s32[] remainder(i, two)
  y = s32[4] conditional(parity, x, x), branch_computations={even, odd}
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT t = (s32[], s32[4]) tuple(i2, y)
}
ENTRY e {
  x = s32[4] parameter(0)
  zero = s32[] constant(0)
  t = (s32[], s32[4]) tuple(zero, x)
  w = (s32[], s32[4]) while(t), condition=cond, body=body
  ROOT r = s32[4] get-tuple-element(w), index=1
}"""


@BOTH_PIPELINES
def test_conditional_inside_a_loop(hlo_passes):
    x = np.array([1, 2, 3, 4], np.int32)
    _, got = check_exact(CONDITIONAL_IN_LOOP, x, hlo_passes=hlo_passes)
    expected = x
    for i in range(5):
        expected = expected + 1 if i % 2 == 0 else expected[::-1]
    np.testing.assert_array_equal(got, expected)


BRANCH_ROOTS = """HloModule branch_roots
identity {
  ROOT p = (s32[4], s32[]) parameter(0)
}
constants {
  p = (s32[4], s32[]) parameter(0)
  c = s32[4] constant({7, 7, 7, 7})
  k = s32[] constant(-1)
  ROOT t = (s32[4], s32[]) tuple(c, k)
}
reversed {
  p = (s32[4], s32[]) parameter(0)
  a = s32[4] get-tuple-element(p), index=0
  k = s32[] get-tuple-element(p), index=1
  r = s32[4] reverse(a), dimensions={0}
  ROOT t = (s32[4], s32[]) tuple(r, k)
}
ENTRY e {
  i = s32[] parameter(0)
  x = s32[4] parameter(1)
  k = s32[] parameter(2)
  t = (s32[4], s32[]) tuple(x, k)
  c = (s32[4], s32[]) conditional(i, t, t, t), branch_computations={identity, constants, reversed}
  a = s32[4] get-tuple-element(c), index=0
  s = s32[4] add(a, x)
  ROOT r = ((s32[4], s32[]), s32[4]) tuple(c, s)
}"""


@BOTH_PIPELINES
@pytest.mark.parametrize("index", [0, 1, 2])
def test_conditional_branch_returning_its_parameter_or_constants(index, hlo_passes):
    """The branch results land in the conditional's buffer, whatever their source: the operand
    (still read after the conditional), a constant, or a new value."""
    x = np.array([1, 2, 3, 4], np.int32)
    _, ((a, k), s) = check_exact(BRANCH_ROOTS, np.int32(index), x, np.int32(42), hlo_passes=hlo_passes)
    expected = [x, np.full(4, 7, np.int32), x[::-1]][index]
    np.testing.assert_array_equal(a, expected)
    np.testing.assert_array_equal(s, expected + x)
    assert int(k) == (-1 if index == 1 else 42)


SHARED_LOOP_COMPUTATIONS = """HloModule two_loops
cond {
  s = (s32[], s32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], s32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = s32[4] get-tuple-element(s), index=1
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  x2 = s32[4] add(x, x)
  ROOT t = (s32[], s32[4]) tuple(i2, x2)
}
ENTRY e {
  x = s32[4] parameter(0)
  zero = s32[] constant(0)
  one = s32[] constant(1)
  t1 = (s32[], s32[4]) tuple(zero, x)
  t2 = (s32[], s32[4]) tuple(one, x)
  w1 = (s32[], s32[4]) while(t1), condition=cond, body=body
  w2 = (s32[], s32[4]) while(t2), condition=cond, body=body
  a = s32[4] get-tuple-element(w1), index=1
  b = s32[4] get-tuple-element(w2), index=1
  ROOT r = (s32[4], s32[4]) tuple(a, b)
}"""

SHARED_BRANCH_COMPUTATION = """HloModule same_branch
f {
  p = s32[4] parameter(0)
  ROOT r = s32[4] reverse(p), dimensions={0}
}
ENTRY e {
  c = pred[] parameter(0)
  x = s32[4] parameter(1)
  y = s32[4] parameter(2)
  ROOT r = s32[4] conditional(c, x, y), true_computation=f, false_computation=f
}"""

@BOTH_PIPELINES
def test_two_loops_sharing_their_computations(hlo_passes):
    x = np.array([1, 2, 3, 4], np.int32)
    _, (a, b) = check_exact(SHARED_LOOP_COMPUTATIONS, x, hlo_passes=hlo_passes)
    np.testing.assert_array_equal(a, 8 * x)
    np.testing.assert_array_equal(b, 4 * x)


@BOTH_PIPELINES
@pytest.mark.parametrize("c", [True, False])
def test_conditional_with_one_computation_for_both_branches(c, hlo_passes):
    x = np.array([1, 2, 3, 4], np.int32)
    _, got = check_exact(SHARED_BRANCH_COMPUTATION, np.bool_(c), x, x + 10, hlo_passes=hlo_passes)
    np.testing.assert_array_equal(got, (x if c else x + 10)[::-1])


CALLS = """HloModule calls
scale {
  x = f32[6] parameter(0)
  y = f32[6] parameter(1)
  s = f32[6] add(x, y)
  ROOT t = (f32[6], f32[6]) tuple(s, x)
}
ENTRY e {
  a = f32[6] parameter(0)
  b = f32[6] parameter(1)
  c1 = (f32[6], f32[6]) call(a, b), to_apply=scale
  s1 = f32[6] get-tuple-element(c1), index=0
  CALL2
}"""
ONE_CALL = "x1 = f32[6] get-tuple-element(c1), index=1\n  ROOT r = (f32[6], f32[6]) tuple(s1, x1)"
TWO_CALLS = ("c2 = (f32[6], f32[6]) call(s1, a), to_apply=scale\n  s2 = f32[6] get-tuple-element(c2), index=0\n"
             "  x2 = f32[6] get-tuple-element(c2), index=1\n  ROOT r = (f32[6], f32[6], f32[6]) tuple(s1, s2, x2)")


@BOTH_PIPELINES
@pytest.mark.parametrize("second", [ONE_CALL, TWO_CALLS], ids=["one_call_site", "two_call_sites"])
def test_call(second, hlo_passes):
    a = np.array([1, 2, 3, 4, 5, 6], np.float32)
    b = np.array([0.5, -1, 8, 0, 2, -6], np.float32)
    exe, got = check_exact(CALLS.replace("CALL2", second), a, b, hlo_passes=hlo_passes)
    if second == ONE_CALL:
        np.testing.assert_array_equal(got[0], a + b)
        np.testing.assert_array_equal(got[1], a)
    else:
        np.testing.assert_array_equal(got[1], a + b + a)
        np.testing.assert_array_equal(got[2], a + b)
    assert not exe.runner.stats.host_ops
