"""The thunk runtime (runtime/executable.py, runtime/thunks.py) on whole programs, each checked
against the reference evaluator (`backend="interpreter"`): exactly for integers and data
movement, within a tolerance for float reductions. Every run's fresh memory starts as poison, so an
output no thunk writes cannot pass by holding an earlier run's bytes.

Covered here: control flow (while with tuple, array, pred and nested state, swaps, aliased initial
values, nested loops, zero trips; conditional on pred and on an index, out-of-range indices, branch
roots that are parameters or constants; call with one and two call sites), buffers
(input_output_alias, outputs that are parameters, constants or repeated, tuple parameters,
non-default layouts, in-place dynamic-update-slice, ops that must not overwrite the operand they
read, size-0 and rank-0 arrays, narrow types), host fallbacks, the thunk dump, split multi-output
fusions, and runs again and from two threads. Gemm and convolution are in test_library.py.
"""

from __future__ import annotations

import shutil
import subprocess
import threading

import ml_dtypes
import numpy as np
import pytest

import hlocc
from hlocc.runtime import executable as runtime_executable
from hlocc.runtime.buffer_assignment import AllocationKind
from hlocc.runtime.thunks import aligned_bytes

# -- helpers (test_library.py uses them too) -------------------------------------------------------


POISON = 0xA5
"""The byte every fresh allocation of a run starts with (a negative float, an odd integer, an invalid
bool): an output or temporary that no thunk writes shows up as poison, not as whatever the memory
held before (which may be a previous run's right answer)."""


@pytest.fixture(autouse=True)
def poisoned_memory(monkeypatch):
    """Every run's fresh allocations (outputs, the temp arena, copied parameters) start as POISON."""
    def poisoned(size: int) -> np.ndarray:
        data = aligned_bytes(size)
        data.fill(POISON)
        return data
    monkeypatch.setattr(runtime_executable, "aligned_bytes", poisoned)


def random_array(shape: tuple[int, ...], dtype, rng: np.random.Generator) -> np.ndarray:
    """Values a dtype holds exactly: small signed/unsigned integers, normal floats, random preds."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    if dtype.kind in "iu" or dtype in (np.dtype(ml_dtypes.int4), np.dtype(ml_dtypes.uint4)):
        info = ml_dtypes.iinfo(dtype)
        return rng.integers(int(info.min), int(info.max) + 1, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def leaves(value) -> list:
    if isinstance(value, tuple):
        return [leaf for v in value for leaf in leaves(v)]
    return [value]


def assert_exact(got, ref) -> None:
    """Same structure, shapes, dtypes and bytes (so NaNs and signed zeros too)."""
    got_leaves, ref_leaves = leaves(got), leaves(ref)
    assert len(got_leaves) == len(ref_leaves)
    for k, (g, r) in enumerate(zip(got_leaves, ref_leaves)):
        g, r = np.asarray(g), np.asarray(r)
        assert (g.shape, g.dtype) == (r.shape, r.dtype), f"leaf {k}: {g.shape} {g.dtype} != {r.shape} {r.dtype}"
        assert np.ascontiguousarray(g).tobytes() == np.ascontiguousarray(r).tobytes(), f"leaf {k}:\n{g}\n!=\n{r}"


def assert_close(got, ref, rtol: float = 1e-5, atol: float = 1e-5) -> None:
    """Same structure, shapes and dtypes; values within rtol/atol (compared in f64/c128)."""
    got_leaves, ref_leaves = leaves(got), leaves(ref)
    assert len(got_leaves) == len(ref_leaves)
    for k, (g, r) in enumerate(zip(got_leaves, ref_leaves)):
        g, r = np.asarray(g), np.asarray(r)
        assert (g.shape, g.dtype) == (r.shape, r.dtype), f"leaf {k}: {g.shape} {g.dtype} != {r.shape} {r.dtype}"
        wide = np.complex128 if r.dtype.kind == "c" else np.float64
        np.testing.assert_allclose(g.astype(wide), r.astype(wide), rtol=rtol, atol=atol, err_msg=f"leaf {k}")


def run_both(text: str, *args, hlo_passes: bool = True):
    """(cpu executable, its result, the interpreter's result) for `args`."""
    exe = hlocc.compile(text, backend="cpu", hlo_passes=hlo_passes)
    ref = hlocc.compile(text, backend="interpreter")(*args)
    return exe, exe(*args), ref


def check_exact(text: str, *args, hlo_passes: bool = True):
    exe, got, ref = run_both(text, *args, hlo_passes=hlo_passes)
    assert_exact(got, ref)
    return exe, got


def host_opcodes(exe) -> list[str]:
    return sorted(op for _, op, _ in exe.runner.stats.host_ops)


def thunk_kinds(exe) -> list[str]:
    return [t.kind for t in exe.runner.program.walk()]


BOTH_PIPELINES = pytest.mark.parametrize("hlo_passes", [True, False], ids=["passes", "no_passes"])
"""With the HLO passes (fusion, simplification) and without (each op or fusion as written; an
entry every op of which a kernel computes is one kLoop fusion)."""


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


# -- buffers ---------------------------------------------------------------------------------------

ALIASED_UPDATE = """HloModule donated, input_output_alias={ {}: (0, {}, may-alias) }
ENTRY e {
  cache = f32[8,4] parameter(0)
  row = f32[1,4] parameter(1)
  i = s32[] parameter(2)
  zero = s32[] constant(0)
  ROOT d = f32[8,4] dynamic-update-slice(cache, row, i, zero)
}"""


def kv_inputs(i: int):
    cache = np.arange(32, dtype=np.float32).reshape(8, 4)
    return cache, np.full((1, 4), -1.5, np.float32), np.int32(i)


@BOTH_PIPELINES
@pytest.mark.parametrize("i", [0, 5, 7, 100, -3])
def test_input_output_alias_leaves_the_callers_array_alone(i, hlo_passes):
    cache, row, index = kv_inputs(i)
    exe, got = check_exact(ALIASED_UPDATE, cache, row, index, hlo_passes=hlo_passes)
    np.testing.assert_array_equal(cache, np.arange(32, dtype=np.float32).reshape(8, 4))
    assert not np.shares_memory(got, cache)
    expected = cache.copy()
    expected[min(max(i, 0), 7)] = -1.5  # start indices are clamped into the operand
    np.testing.assert_array_equal(got, expected)
    # The update is in place in the (copied) parameter's allocation: the output is that allocation.
    output = exe.runner.assignment.output_slices[0].allocation_index
    assert exe.runner.assignment.allocations[output].kind is AllocationKind.PARAMETER
    assert exe.runner.stats.copies == 0


DONATED = {
    # The output is the donated parameter's buffer, but reverse and transpose cannot run in place.
    "reverse": ("{ {}: (0, {}, may-alias) }", "p = s32[8] parameter(0)\n  ROOT r = s32[8] reverse(p), dimensions={0}"),
    "transpose": ("{ {}: (0, {}, may-alias) }",
                  "p = s32[8] parameter(0)\n  r = s32[2,4] reshape(p)\n  t = s32[4,2] transpose(r), dimensions={1,0}\n"
                  "  ROOT f = s32[8] reshape(t)"),
    # Two donated parameters swapped: each output is the other's buffer.
    "swap": ("{ {0}: (0, {}, may-alias), {1}: (1, {}, may-alias) }",
             "p = s32[8] parameter(0)\n  q = s32[8] parameter(1)\n  ROOT t = (s32[8], s32[8]) tuple(q, p)"),
    # A leaf of a tuple parameter donated to an output that also needs the other leaf.
    "tuple_leaf": ("{ {1}: (0, {1}, may-alias) }",
                   "p = (s32[8], s32[8]) parameter(0)\n  a = s32[8] get-tuple-element(p), index=0\n"
                   "  b = s32[8] get-tuple-element(p), index=1\n  s = s32[8] add(a, b)\n"
                   "  ROOT t = (s32[8], s32[8]) tuple(b, s)"),
}


@BOTH_PIPELINES
@pytest.mark.parametrize("name", DONATED)
def test_donated_parameters(name, hlo_passes):
    aliases, body = DONATED[name]
    text = f"HloModule donated, input_output_alias={aliases}\nENTRY e {{\n  {body}\n}}"
    x, y = np.arange(8, dtype=np.int32), np.arange(10, 18, dtype=np.int32)
    args = ((x, y),) if name == "tuple_leaf" else (x, y) if name == "swap" else (x,)
    _, got = check_exact(text, *args, hlo_passes=hlo_passes)
    np.testing.assert_array_equal(x, np.arange(8))
    np.testing.assert_array_equal(y, np.arange(10, 18))
    for leaf in leaves(got):
        assert not np.shares_memory(leaf, x) and not np.shares_memory(leaf, y)


KV_CACHE = """HloModule kv
ENTRY e {
  cache = f32[8,4] parameter(0)
  row = f32[1,4] parameter(1)
  i = s32[] parameter(2)
  zero = s32[] constant(0)
  scaled = f32[8,4] negate(cache)
  d = f32[8,4] dynamic-update-slice(scaled, row, i, zero)
  ROOT e = f32[8,4] add(d, d)
}"""


@BOTH_PIPELINES
@pytest.mark.parametrize("i", [0, 3, 7, 9, -1])
def test_dynamic_update_slice_in_place_on_a_dying_operand(i, hlo_passes):
    cache, row, index = kv_inputs(i)
    exe, got = check_exact(KV_CACHE, cache, row, index, hlo_passes=hlo_passes)
    expected = -cache
    expected[min(max(i, 0), 7)] = -1.5
    np.testing.assert_array_equal(got, 2 * expected)
    assert exe.runner.stats.copies == 0, exe.runner.to_string()
    assert not exe.runner.stats.host_ops


KV_CACHE_IN_LOOP = """HloModule kv_loop
cond {
  s = (s32[], f32[6,4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(6)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[6,4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  cache = f32[6,4] get-tuple-element(s), index=1
  f = f32[] convert(i)
  row = f32[1,4] broadcast(f), dimensions={}
  zero = s32[] constant(0)
  d = f32[6,4] dynamic-update-slice(cache, row, i, zero)
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT t = (s32[], f32[6,4]) tuple(i2, d)
}
ENTRY e {
  cache = f32[6,4] parameter(0)
  zero = s32[] constant(0)
  t = (s32[], f32[6,4]) tuple(zero, cache)
  w = (s32[], f32[6,4]) while(t), condition=cond, body=body
  ROOT r = f32[6,4] get-tuple-element(w), index=1
}"""


@pytest.mark.parametrize("donated", [False, True])
def test_dynamic_update_slice_in_place_in_a_loop(donated):
    text = KV_CACHE_IN_LOOP
    if donated:
        text = text.replace("HloModule kv_loop", "HloModule kv_loop, input_output_alias={ {}: (0, {}, may-alias) }")
    cache = np.full((6, 4), 9.0, np.float32)
    exe, got = check_exact(text, cache)
    np.testing.assert_array_equal(got, np.repeat(np.arange(6, dtype=np.float32)[:, None], 4, axis=1))
    np.testing.assert_array_equal(cache, 9.0)
    # The cache is copied into the loop state at most once, before the loop (not at all when it is
    # donated: the loop updates the parameter's buffer), and updated in place by every iteration.
    cache_copies = [t for t in exe.runner.program.walk() if t.kind == "copy" and t.source.size == 96]
    assert len(cache_copies) == (0 if donated else 1), exe.runner.to_string()
    assert cache_copies == [t for t in exe.runner.program.thunks if t in cache_copies]


OUTPUT_IS_PARAMETER = """HloModule passthrough
ENTRY e {
  p = f32[5] parameter(0)
  q = s32[2,3] parameter(1)
  n = f32[5] negate(p)
  ROOT t = (f32[5], s32[2,3], f32[5]) tuple(p, q, n)
}"""


@BOTH_PIPELINES
def test_output_that_is_a_parameter(hlo_passes):
    p = np.array([1, -2, 3.5, 0, -0.0], np.float32)
    q = np.arange(6, dtype=np.int32).reshape(2, 3)
    exe, (rp, rq, rn) = check_exact(OUTPUT_IS_PARAMETER, p, q, hlo_passes=hlo_passes)
    assert not np.shares_memory(rp, p) and not np.shares_memory(rq, q)
    rp[:] = 7
    rq[:] = 7
    np.testing.assert_array_equal(p, [1, -2, 3.5, 0, -0.0])
    np.testing.assert_array_equal(q, np.arange(6).reshape(2, 3))


def test_root_that_is_a_parameter():
    text = "HloModule p\nENTRY e {\n  ROOT p = s32[2,2]{0,1} parameter(0)\n}"
    x = np.array([[1, 2], [3, 4]], np.int32)
    _, got = check_exact(text, x)
    assert not np.shares_memory(got, x)


OUTPUT_IS_CONSTANT = """HloModule constant_out
ENTRY e {
  p = s32[3] parameter(0)
  c = s32[3] constant({10, 20, 30})
  f = f32[] constant(2.5)
  s = s32[3] add(p, c)
  ROOT t = (s32[3], s32[3], f32[]) tuple(c, s, f)
}"""


@BOTH_PIPELINES
def test_output_that_is_a_constant(hlo_passes):
    x = np.array([1, 2, 3], np.int32)
    exe, (c, s, f) = check_exact(OUTPUT_IS_CONSTANT, x, hlo_passes=hlo_passes)
    np.testing.assert_array_equal(c, [10, 20, 30])
    np.testing.assert_array_equal(s, [11, 22, 33])
    assert float(f) == 2.5
    # Whatever the caller does with the result must not change the executable's constant.
    if c.flags.writeable:
        c[:] = -1
    c2, s2, _ = exe(x)
    np.testing.assert_array_equal(c2, [10, 20, 30])
    np.testing.assert_array_equal(s2, [11, 22, 33])
    assert not np.shares_memory(c, c2)


def test_root_that_is_a_constant():
    text = "HloModule c\nENTRY e {\n  ROOT c = bf16[2,2]{0,1} constant({{1, 2}, {3, 4}})\n}"
    _, got = check_exact(text)
    np.testing.assert_array_equal(got.astype(np.float32), [[1, 2], [3, 4]])


REPEATED_OUTPUT = """HloModule repeated
ENTRY e {
  p = f32[4] parameter(0)
  n = f32[4] negate(p)
  ROOT t = (f32[4], f32[4], f32[4], f32[4]) tuple(n, n, p, p)
}"""


@BOTH_PIPELINES
def test_repeated_output(hlo_passes):
    p = np.array([1, 2, 3, 4], np.float32)
    _, got = check_exact(REPEATED_OUTPUT, p, hlo_passes=hlo_passes)
    np.testing.assert_array_equal(got[0], -p)
    np.testing.assert_array_equal(got[2], p)
    # Each output leaf is an array of its own (XLA copies a buffer that appears twice in the result).
    for a in range(4):
        for b in range(a + 1, 4):
            assert not np.shares_memory(got[a], got[b]), (a, b)


TUPLE_PARAMETER = """HloModule tuple_param
ENTRY e {
  p = (f32[3], (s32[2], pred[2])) parameter(0)
  x = f32[3] get-tuple-element(p), index=0
  inner = (s32[2], pred[2]) get-tuple-element(p), index=1
  y = s32[2] get-tuple-element(inner), index=0
  z = pred[2] get-tuple-element(inner), index=1
  nx = f32[3] negate(x)
  ny = s32[2] select(z, y, y)
  ROOT t = (f32[3], s32[2], (s32[2], pred[2])) tuple(nx, ny, inner)
}"""


@BOTH_PIPELINES
def test_tuple_shaped_parameter(hlo_passes):
    arg = (np.array([1, 2, -3], np.float32), (np.array([5, 6], np.int32), np.array([True, False])))
    _, (nx, ny, (y, z)) = check_exact(TUPLE_PARAMETER, arg, hlo_passes=hlo_passes)
    np.testing.assert_array_equal(nx, [-1, -2, 3])
    np.testing.assert_array_equal(y, [5, 6])
    assert z.dtype == np.bool_ and list(z) == [True, False]


LAYOUTS = """HloModule layouts
ENTRY e {
  p = f32[3,4]{0,1} parameter(0)
  q = s32[2,3,4]{1,2,0} parameter(1)
  t = f32[4,3]{1,0} transpose(p), dimensions={1,0}
  n = f32[3,4]{0,1} negate(p)
  c = s32[2,3,4]{0,1,2} copy(q)
  r = s32[4,3,2]{2,0,1} transpose(q), dimensions={2,1,0}
  ROOT out = (f32[4,3]{1,0}, f32[3,4]{0,1}, s32[2,3,4]{0,1,2}, s32[4,3,2]{2,0,1}, f32[3,4]{0,1}) tuple(t, n, c, r, p)
}"""


@BOTH_PIPELINES
def test_non_default_layouts_on_parameters_and_results(hlo_passes):
    p = np.arange(12, dtype=np.float32).reshape(3, 4)
    q = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    _, (t, n, c, r, pp) = check_exact(LAYOUTS, p, q, hlo_passes=hlo_passes)
    np.testing.assert_array_equal(t, p.T)
    np.testing.assert_array_equal(n, -p)
    np.testing.assert_array_equal(c, q)
    np.testing.assert_array_equal(r, q.transpose(2, 1, 0))
    np.testing.assert_array_equal(pp, p)


def test_non_default_layout_bitcast_reshape():
    # A reshape between layouts whose physical orders agree is a bitcast (no thunk): the bytes of
    # f32[3,4]{0,1} are those of f32[4,3]{1,0}.
    text = """HloModule bitcast
ENTRY e {
  p = f32[3,4]{0,1} parameter(0)
  n = f32[3,4]{0,1} negate(p)
  ROOT r = f32[12]{0} reshape(n)
}"""
    p = np.arange(12, dtype=np.float32).reshape(3, 4)
    _, got = check_exact(text, p, hlo_passes=False)
    np.testing.assert_array_equal(got, -p.reshape(12))


SIZE_ZERO = """HloModule empty
ENTRY e {
  p = f32[0,4] parameter(0)
  q = f32[3,4] parameter(1)
  n = f32[0,4] negate(p)
  c = f32[3,4] concatenate(p, q), dimensions={0}
  e = s32[0] constant({})
  ROOT t = (f32[0,4], f32[3,4], s32[0], f32[0,4]) tuple(n, c, e, p)
}"""


@pytest.mark.parametrize("hlo_passes", [True, False], ids=["passes", "no_passes"])
def test_size_zero_arrays(hlo_passes):
    p = np.zeros((0, 4), np.float32)
    q = np.arange(12, dtype=np.float32).reshape(3, 4)
    _, (n, c, e, pp) = check_exact(SIZE_ZERO, p, q, hlo_passes=hlo_passes)
    assert n.shape == (0, 4) and e.shape == (0,) and pp.shape == (0, 4)
    np.testing.assert_array_equal(c, q)


EMPTY_AND_NONEMPTY_OUTPUTS = """HloModule empty_first
fused {
  p = f32[0] parameter(0)
  q = f32[4] parameter(1)
  n = f32[0] negate(p)
  m = f32[4] negate(q)
  ROOT t = (OUTPUTS) tuple(ORDER)
}
ENTRY e {
  p = f32[0] parameter(0)
  q = f32[4] parameter(1)
  ROOT f = (OUTPUTS) fusion(p, q), kind=kLoop, calls=fused
}"""


@pytest.mark.parametrize("empty_first", [True, False], ids=["empty_first", "empty_last"])
def test_multi_output_fusion_with_an_empty_output(empty_first):
    order, outputs = ("n, m", "f32[0], f32[4]") if empty_first else ("m, n", "f32[4], f32[0]")
    text = EMPTY_AND_NONEMPTY_OUTPUTS.replace("OUTPUTS", outputs).replace("ORDER", order)
    q = np.array([1, -2, 3, -4], np.float32)
    _, got = check_exact(text, np.zeros(0, np.float32), q, hlo_passes=False)
    np.testing.assert_array_equal(got[1 if empty_first else 0], -q)


SCALARS = """HloModule scalars
ENTRY e {
  x = f32[] parameter(0)
  n = s32[] parameter(1)
  b = pred[] parameter(2)
  y = f32[] multiply(x, x)
  c = f32[] convert(n)
  s = f32[] add(y, c)
  nb = pred[] not(b)
  v = f32[3] broadcast(s), dimensions={}
  ROOT t = (f32[], pred[], f32[3], s32[]) tuple(s, nb, v, n)
}"""


@BOTH_PIPELINES
def test_scalar_parameters_and_results(hlo_passes):
    _, (s, nb, v, n) = check_exact(SCALARS, np.float32(1.5), np.int32(-4), np.bool_(True), hlo_passes=hlo_passes)
    assert s.shape == () and float(s) == 1.5 * 1.5 - 4 and not nb and int(n) == -4
    np.testing.assert_array_equal(v, np.full(3, s))


def test_scalar_root():
    text = "HloModule s\nENTRY e {\n  x = s32[] parameter(0)\n  ROOT y = s32[] negate(x)\n}"
    _, got = check_exact(text, np.int32(5))
    assert got.shape == () and int(got) == -5


NARROW_TYPES = """HloModule narrow
ENTRY e {
  p = pred[9] parameter(0)
  q = pred[9] parameter(1)
  a = s4[9] parameter(2)
  b = u4[9] parameter(3)
  h = bf16[9] parameter(4)
  f = f8e4m3fn[9] parameter(5)
  g = f8e5m2[9] parameter(6)
  x = pred[9] xor(p, q)
  s = s4[9] add(a, a)
  u = u4[9] multiply(b, b)
  hh = bf16[9] add(h, h)
  fc = f32[9] convert(f)
  gh = bf16[9] convert(g)
  hf = f8e4m3fn[9] convert(h)
  ROOT t = (pred[9], s4[9], u4[9], bf16[9], f32[9], bf16[9], f8e4m3fn[9], pred[9], s4[9]) tuple(x, s, u, hh, fc, gh, hf, p, a)
}"""


@BOTH_PIPELINES
def test_pred_sub_byte_and_narrow_float_arrays(hlo_passes):
    rng = np.random.default_rng(21)
    dtypes = [np.bool_, np.bool_, ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn,
              ml_dtypes.float8_e5m2]
    args = [random_array((9,), d, rng) for d in dtypes]
    _, got = check_exact(NARROW_TYPES, *args, hlo_passes=hlo_passes)
    np.testing.assert_array_equal(got[0], args[0] ^ args[1])
    np.testing.assert_array_equal(got[1].astype(np.int32), ((args[2].astype(np.int32) * 2 + 8) % 16) - 8)
    np.testing.assert_array_equal(got[2].astype(np.int32), args[3].astype(np.int32) ** 2 % 16)


# Ops that read their operand at other positions than they write: the operand (a kernel's result
# that dies there) must not share their output buffer. A dot next to them keeps the entry from being
# one fusion, so without the HLO passes each op is a kernel of its own.
OTHER_POSITION_READERS = {
    "reverse": "s32[8] reverse(x), dimensions={0}",
    "strided_slice": "s32[8] slice(x2), slice={[0:16:2]}",
    "concatenate": "s32[8] concatenate(xh, xh), dimensions={0}",
    "pad": "s32[8] pad(xh, z), padding=2_2",
    "dynamic_slice": "s32[8] dynamic-slice(x2, i), dynamic_slice_sizes={8}",
    "dynamic_update_slice": "s32[8] dynamic-update-slice(x, xh2, i)",
    "gather": ("s32[8] gather(x, gi), offset_dims={}, collapsed_slice_dims={0}, start_index_map={0}, "
               "index_vector_dim=1, slice_sizes={1}"),
    "reduce_window": "s32[8] reduce-window(x, z), window={size=3 pad=1_1}, to_apply=add",
    "select_of_reversed": "s32[8] select(pr, x, xr)",
    "sort": "s32[8] sort(x), dimensions={0}, to_apply=greater",
}
READER_MODULE = """HloModule readers
add {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT c = s32[] add(a, b)
}
greater {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GT
}
ENTRY e {
  p = s32[8] parameter(0)
  i = s32[] parameter(1)
  z = s32[] constant(0)
  x = s32[8] negate(p)
  xr = s32[8] reverse(x), dimensions={0}
  pr = pred[8] compare(p, z), direction=GT
  gi = s32[8,1] constant({{7},{6},{5},{4},{3},{2},{1},{0}})
  x2 = s32[16] concatenate(x, p), dimensions={0}
  xh = s32[4] slice(x), slice={[2:6]}
  xh2 = s32[4] slice(x), slice={[1:5]}
  y = OP
  r = s32[8] add(y, y)
  d = s32[] dot(p, p), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  ROOT t = (s32[8], s32[]) tuple(r, d)
}"""


@BOTH_PIPELINES
@pytest.mark.parametrize("name", OTHER_POSITION_READERS)
def test_ops_reading_a_dying_operand_at_other_positions(name, hlo_passes):
    text = READER_MODULE.replace("OP", OTHER_POSITION_READERS[name]).replace("pr = pred[8] compare(p, z)",
                                                                                "pr = pred[8] compare(p, zb)")
    text = text.replace("  x = s32[8] negate(p)", "  zb = s32[8] broadcast(z), dimensions={}\n  x = s32[8] negate(p)")
    exe, _ = check_exact(text, np.arange(8, dtype=np.int32) * 3 - 7, np.int32(3), hlo_passes=hlo_passes)
    if not hlo_passes:
        assert exe.runner.stats.kernels + len(exe.runner.stats.host_ops) >= 8


# -- host fallbacks --------------------------------------------------------------------------------

SORT_AND_TOPK = """HloModule sort_topk
less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ROOT lt = pred[] compare(a, b), direction=LT
}
ENTRY e {
  x = f32[3,10] parameter(0)
  n = f32[3,10] negate(x)
  iota = s32[3,10] iota(), iota_dimension=1
  sorted = (f32[3,10], s32[3,10]) sort(n, iota), dimensions={1}, is_stable=true, to_apply=less
  values = f32[3,10] get-tuple-element(sorted), index=0
  order = s32[3,10] get-tuple-element(sorted), index=1
  top = (f32[3,4], s32[3,4]) topk(x), k=4, largest=true
  tv = f32[3,4] get-tuple-element(top), index=0
  ti = s32[3,4] get-tuple-element(top), index=1
  e = f32[3,4] exponential(tv)
  ROOT t = (f32[3,10], s32[3,10], f32[3,4], s32[3,4]) tuple(values, order, e, ti)
}"""


@BOTH_PIPELINES
def test_sort_and_topk_run_on_the_host(hlo_passes):
    x = np.random.default_rng(31).integers(-5, 5, (3, 10)).astype(np.float32)  # ties: stability matters
    exe, got, ref = run_both(SORT_AND_TOPK, x, hlo_passes=hlo_passes)
    assert_exact(got[:2], ref[:2])
    assert_exact(got[3], ref[3])
    assert_close(got[2], ref[2], rtol=1e-6)
    np.testing.assert_array_equal(got[0], np.sort(-x, axis=1, kind="stable"))
    np.testing.assert_array_equal(got[1], np.argsort(-x, axis=1, kind="stable"))
    assert host_opcodes(exe) == ["sort", "topk"], exe.runner.stats.to_string()
    assert exe.runner.stats.kernels >= 1


RNG_MODULE = """HloModule rng
ENTRY e {
  lo = f32[] parameter(0)
  hi = f32[] constant(3)
  r = f32[64] rng(lo, hi), distribution=rng_uniform
  ROOT s = f32[64] add(r, r)
}"""


def test_rng_runs_on_the_host_with_the_executables_seed():
    exe, got, ref = run_both(RNG_MODULE, np.float32(2))
    assert_exact(got, ref)
    assert host_opcodes(exe) == ["rng"]
    assert (got >= 4).all() and (got < 6).all() and len(np.unique(got)) > 32
    assert_exact(exe(np.float32(2)), got)  # each run starts from the seed


def test_two_rngs_and_an_rng_bit_generator_match_the_interpreter():
    text = """HloModule rngs
ENTRY e {
  lo = f32[] parameter(0)
  state = u64[2] parameter(1)
  hi = f32[] constant(3)
  r = f32[8] rng(lo, hi), distribution=rng_uniform
  s = f32[4] rng(lo, hi), distribution=rng_normal
  n = f32[4] negate(s)
  b = (u64[2], u32[8]) rng-bit-generator(state), algorithm=rng_philox
  ROOT t = (f32[4], f32[8], (u64[2], u32[8])) tuple(n, r, b)
}"""
    exe, got = check_exact(text, np.float32(2), np.array([1, 2], np.uint64))
    assert host_opcodes(exe) == ["rng", "rng", "rng-bit-generator"]
    assert_exact(exe(np.float32(2), np.array([1, 2], np.uint64)), got)


SCATTER = """HloModule scatter
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
fused_scatter {
  p = f32[5,3] parameter(0)
  i = s32[4] parameter(1)
  u = f32[4,3] parameter(2)
  n = f32[4,3] negate(u)
  ROOT s = f32[5,3] scatter(p, i, n), update_window_dims={1}, inserted_window_dims={0},
    scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
}
ENTRY e {
  p = f32[5,3] parameter(0)
  i = s32[4] parameter(1)
  u = f32[4,3] parameter(2)
  ROOT f = f32[5,3] fusion(p, i, u), kind=kInput, calls=fused_scatter
}"""


@BOTH_PIPELINES
def test_scatter_fusion_runs_on_the_host(hlo_passes):
    p = np.arange(15, dtype=np.float32).reshape(5, 3)
    i = np.array([1, 4, 1, 7], np.int32)  # a repeated and an out-of-bounds index
    u = np.arange(12, dtype=np.float32).reshape(4, 3)
    exe, got = check_exact(SCATTER, p, i, u, hlo_passes=hlo_passes)
    expected = p.copy()
    expected[1] -= u[0] + u[2]
    expected[4] -= u[1]
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(p, np.arange(15, dtype=np.float32).reshape(5, 3))
    assert host_opcodes(exe) == ["fusion"], exe.runner.stats.to_string()


def test_host_op_inside_a_loop():
    text = """HloModule sort_loop
less {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT gt = pred[] compare(a, b), direction=GT
}
cond {
  s = (s32[], s32[6]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], s32[6]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = s32[6] get-tuple-element(s), index=1
  sorted = s32[6] sort(x), dimensions={0}, to_apply=less
  ib = s32[6] broadcast(i), dimensions={}
  iota = s32[6] iota(), iota_dimension=0
  m = s32[6] multiply(iota, ib)
  y = s32[6] add(sorted, m)
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT t = (s32[], s32[6]) tuple(i2, y)
}
ENTRY e {
  x = s32[6] parameter(0)
  zero = s32[] constant(0)
  t = (s32[], s32[6]) tuple(zero, x)
  w = (s32[], s32[6]) while(t), condition=cond, body=body
  ROOT r = s32[6] get-tuple-element(w), index=1
}"""
    exe, _ = check_exact(text, np.array([3, -1, 4, 1, -5, 9], np.int32))
    assert host_opcodes(exe) == ["sort"]


def test_fusion_with_a_tuple_operand_runs_on_the_host():
    text = """HloModule tuple_operand
fused {
  p = (s32[4], s32[4]) parameter(0)
  a = s32[4] get-tuple-element(p), index=0
  b = s32[4] get-tuple-element(p), index=1
  ROOT s = s32[4] subtract(a, b)
}
ENTRY e {
  x = s32[4] parameter(0)
  y = s32[4] parameter(1)
  t = (s32[4], s32[4]) tuple(x, y)
  ROOT f = s32[4] fusion(t), kind=kLoop, calls=fused
}"""
    x = np.array([1, 2, 3, 4], np.int32)
    exe, got = check_exact(text, x, 5 * x, hlo_passes=False)
    np.testing.assert_array_equal(got, -4 * x)
    assert host_opcodes(exe) == ["fusion"] and "tuple-shaped operand" in exe.runner.stats.host_ops[0][2]


# -- the thunk dump --------------------------------------------------------------------------------

DUMP_MODULE = """HloModule dump
cond {
  s = (s32[], f32[8,4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[8,4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[8,4] get-tuple-element(s), index=1
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  x2 = f32[8,4] sine(x)
  ROOT t = (s32[], f32[8,4]) tuple(i2, x2)
}
ENTRY e {
  x = f32[8,4] parameter(0)
  m = f32[8,8] parameter(1)
  zero = s32[] constant(0)
  t = (s32[], f32[8,4]) tuple(zero, x)
  w = (s32[], f32[8,4]) while(t), condition=cond, body=body
  y = f32[8,4] get-tuple-element(w), index=1
  ROOT d = f32[8,4] dot(m, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}"""

# The loop state is copied into the arena once; both body kernels update it in place, so an
# iteration ends with no copy; the gemm reads the final state where the loop left it.
DUMP_CHECKS = r"""
CHECK:      copy (before w): {allocation {{[0-9]+}}, offset 0, size 4} -> {allocation [[ARENA:[0-9]+]], offset [[I:[0-9]+]], size 4}
CHECK-NEXT: copy (before w): {allocation 0, offset 0, size 128} -> {allocation [[ARENA]], offset [[X:[0-9]+]], size 128}
CHECK-NEXT: while w: condition
CHECK-NEXT:   kernel {{.*}} (loop emitter): s32[]@{allocation [[ARENA]], offset [[I]], size 4}, pred[]@{allocation [[ARENA]], offset [[P:[0-9]+]], size 1}
CHECK-NEXT:   predicate pred[]@{allocation [[ARENA]], offset [[P]], size 1}
CHECK-NEXT: body
CHECK-DAG:    kernel {{.*}} (loop emitter): f32[8,4]@{allocation [[ARENA]], offset [[X]], size 128}, f32[8,4]@{allocation [[ARENA]], offset [[X]], size 128}
CHECK-DAG:    kernel {{.*}} (loop emitter): s32[]@{allocation [[ARENA]], offset [[I]], size 4}, s32[]@{allocation [[ARENA]], offset [[I]], size 4}
CHECK-NOT:  copy
CHECK:      gemm d: f32[8,8]@{allocation 1, offset 0, size 256}, f32[8,4]@{allocation [[ARENA]], offset [[X]], size 128} -> f32[8,4]@{allocation {{[0-9]+}}, offset 0, size 128}
CHECK-NOT:  {{.}}
"""


@pytest.mark.skipif(shutil.which("filecheck") is None, reason="the `filecheck` command (PyPI filecheck) is not installed")
def test_thunk_dump_filecheck(tmp_path):
    exe = hlocc.compile(DUMP_MODULE, backend="cpu")
    dump = exe.runner.to_string()
    checks = tmp_path / "thunks.checks"
    checks.write_text(DUMP_CHECKS)
    proc = subprocess.run(["filecheck", str(checks)], input=dump, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr + "\n" + dump
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(8, 4)
    m = np.random.default_rng(45).standard_normal((8, 8)).astype(np.float32)
    _, got, ref = run_both(DUMP_MODULE, x, m)
    assert_close(got, ref, rtol=1e-6, atol=1e-6)


# -- multi-output fusions --------------------------------------------------------------------------

MULTI_OUTPUT = """HloModule multi
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
fused {
  p = f32[16,10] parameter(0)
  q = f32[16] parameter(1)
  e = f32[16,10] add(p, p)
  zero = f32[] constant(0)
  r = f32[16] reduce(e, zero), dimensions={1}, to_apply=add
  s = f32[16] subtract(r, q)
  ROOT t = (f32[16,10], f32[16], f32[16]) tuple(e, s, q)
}
ENTRY e {
  p = f32[16,10] parameter(0)
  q = f32[16] parameter(1)
  ROOT f = (f32[16,10], f32[16], f32[16]) fusion(p, q), kind=kLoop, calls=fused
}"""


def test_multi_output_fusion_with_different_output_sizes_is_split():
    rng = np.random.default_rng(41)
    p = rng.integers(-8, 8, (16, 10)).astype(np.float32)  # sums of small integers: exact in any order
    q = rng.integers(-8, 8, 16).astype(np.float32)
    exe, (e, s, qq) = check_exact(MULTI_OUTPUT, p, q, hlo_passes=False)
    np.testing.assert_array_equal(e, 2 * p)
    np.testing.assert_array_equal(s, 2 * p.sum(axis=1) - q)
    np.testing.assert_array_equal(qq, q)
    assert exe.runner.stats.kernels == 2 and not exe.runner.stats.host_ops, exe.runner.stats.to_string()
    assert [t.instr_name for t in exe.runner.program.walk() if t.kind == "kernel"] == ["f.part0", "f.part1"]


def test_multi_output_fusion_with_equal_output_sizes_is_one_kernel():
    text = """HloModule multi_same
fused {
  p = f32[4,6] parameter(0)
  n = f32[4,6] negate(p)
  t = f32[6,4] transpose(p), dimensions={1,0}
  c = s32[24] convert(reshape(p))
  ROOT r = (f32[4,6], f32[6,4]) tuple(n, t)
}
ENTRY e {
  p = f32[4,6] parameter(0)
  ROOT f = (f32[4,6], f32[6,4]) fusion(p), kind=kLoop, calls=fused
}"""
    text = text.replace("  c = s32[24] convert(reshape(p))\n", "")
    p = np.arange(24, dtype=np.float32).reshape(4, 6)
    exe, (n, t) = check_exact(text, p, hlo_passes=False)
    np.testing.assert_array_equal(t, p.T)
    assert exe.runner.stats.kernels == 1


ARGMAX = """HloModule argmax
argmax {
  a = f32[] parameter(0)
  i = s32[] parameter(1)
  b = f32[] parameter(2)
  j = s32[] parameter(3)
  gt = pred[] compare(a, b), direction=GT
  eq = pred[] compare(a, b), direction=EQ
  lt = pred[] compare(i, j), direction=LT
  tie = pred[] and(eq, lt)
  take = pred[] or(gt, tie)
  m = f32[] select(take, a, b)
  k = s32[] select(take, i, j)
  ROOT r = (f32[], s32[]) tuple(m, k)
}
ENTRY e {
  x = f32[4,6] parameter(0)
  io = s32[4,6] iota(), iota_dimension=1
  ninf = f32[] constant(-inf)
  zero = s32[] constant(0)
  r = (f32[4], s32[4]) reduce(x, io, ninf, zero), dimensions={1}, to_apply=argmax
  v = f32[4] get-tuple-element(r), index=0
  k = s32[4] get-tuple-element(r), index=1
  d = f32[] dot(v, v), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  ROOT t = (f32[4], s32[4], f32[]) tuple(v, k, d)
}"""


@BOTH_PIPELINES
def test_variadic_reduce_is_one_kernel_with_two_outputs(hlo_passes):
    x = np.random.default_rng(43).integers(-3, 3, (4, 6)).astype(np.float32)  # ties: the lower index wins
    exe, got = check_exact(ARGMAX, x, hlo_passes=hlo_passes)
    np.testing.assert_array_equal(got[1], np.argmax(x, axis=1))
    assert not exe.runner.stats.host_ops


# -- running an executable again and concurrently --------------------------------------------------

CONCURRENT = """HloModule concurrent
cond {
  s = (s32[], f32[4,4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(4)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[4,4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[4,4] get-tuple-element(s), index=1
  d = f32[4,4] dot(x, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  h = f32[] constant(0.25)
  hb = f32[4,4] broadcast(h), dimensions={}
  y = f32[4,4] multiply(d, hb)
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT t = (s32[], f32[4,4]) tuple(i2, y)
}
ENTRY e {
  x = f32[4,4] parameter(0)
  zero = s32[] constant(0)
  t = (s32[], f32[4,4]) tuple(zero, x)
  w = (s32[], f32[4,4]) while(t), condition=cond, body=body
  r = f32[4,4] get-tuple-element(w), index=1
  ROOT n = f32[4,4] negate(r)
}"""


def concurrent_inputs(k: int) -> np.ndarray:
    return np.random.default_rng(50 + k).integers(-2, 3, (4, 4)).astype(np.float32)


def test_an_executable_runs_twice_with_fresh_memory():
    exe = hlocc.compile(CONCURRENT, backend="cpu")
    reference = hlocc.compile(CONCURRENT, backend="interpreter")
    first = exe(concurrent_inputs(0))
    second = exe(concurrent_inputs(1))
    again = exe(concurrent_inputs(0))
    assert_close(first, reference(concurrent_inputs(0)), rtol=1e-6)
    assert_close(second, reference(concurrent_inputs(1)), rtol=1e-6)
    assert_exact(again, first)
    assert not np.shares_memory(first, again)


def test_an_executable_runs_from_two_threads_at_once():
    exe = hlocc.compile(CONCURRENT, backend="cpu")
    reference = hlocc.compile(CONCURRENT, backend="interpreter")
    expected = [reference(concurrent_inputs(k)) for k in range(2)]
    start = threading.Barrier(2)
    results: dict[int, list] = {0: [], 1: []}
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            start.wait()
            for _ in range(30):
                results[k].append(exe(concurrent_inputs(k)))
        except BaseException as e:  # noqa: BLE001  (reported by the main thread)
            errors.append(e)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for k in range(2):
        assert len(results[k]) == 30
        for got in results[k]:
            assert_close(got, expected[k], rtol=1e-6)
            assert_exact(got, results[k][0])


LARGE = """HloModule large
ENTRY e {
  x = f32[256,256] parameter(0)
  y = f32[256,256] parameter(1)
  s = f32[256,256] add(x, y)
  t = f32[256,256] transpose(s), dimensions={1,0}
  m = f32[256,256] multiply(t, y)
  d = f32[256,256] dot(s, m), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT r = (f32[256,256], f32[256,256]) tuple(m, d)
}"""


def test_large_launches_from_two_threads_at_once():
    """Kernels of 65536 elements run their blocks on the shared thread pool; two runs at once
    share that pool and must still not share memory."""
    exe = hlocc.compile(LARGE, backend="cpu")
    assert exe.runner.stats.kernels >= 1 and exe.runner.stats.library_calls["gemm"] == 1
    inputs = [tuple(np.random.default_rng(60 + 2 * k + j).integers(-3, 4, (256, 256)).astype(np.float32)
                    for j in range(2)) for k in range(2)]
    reference = hlocc.compile(LARGE, backend="interpreter")
    expected = [reference(*args) for args in inputs]
    results: dict[int, list] = {0: [], 1: []}
    start = threading.Barrier(2)

    def work(k: int) -> None:
        start.wait()
        for _ in range(5):
            results[k].append(exe(*inputs[k]))
    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(2):
        assert len(results[k]) == 5
        for got in results[k]:
            assert_exact(got[0], expected[k][0])
            assert_close(got[1], expected[k][1], rtol=1e-6, atol=1e-3)  # integer sums: exact up to rounding order
