"""The per-call host path planned once (runtime/call_plan.py, compiler.Executable.checked): the fast
argument check and the full one agree, errors keep their messages, outputs are never reused, threads
calling one executable get their own temporaries, and the work planned once is not redone per call.
Numerics against the evaluator (the interpreter backend)."""

import gc
import sys
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import hlocc
from hlocc.compiler import check_arguments
from hlocc.errors import ArgumentError
from hlocc.runtime import thunks

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from overhead import FIVE, ONE, WHILE  # noqa: E402  (the benchmark's programs)

# Two kernels with a temporary between them (hlo_passes off: each fusion its own kernel), a
# constant read by the second, and a tuple result.
TWO_KERNELS = """HloModule two
f0 {
  p = f32[DIM]{0} parameter(0)
  ROOT r = f32[DIM]{0} multiply(p, p)
}
f1 {
  p = f32[DIM]{0} parameter(0)
  q = f32[DIM]{0} parameter(1)
  c = f32[] constant(0.5)
  b = f32[DIM]{0} broadcast(c), dimensions={}
  ROOT r = f32[DIM]{0} add(f32[DIM]{0} multiply(p, b), q)
}
ENTRY e {
  x = f32[DIM]{0} parameter(0)
  y = f32[DIM]{0} parameter(1)
  t = f32[DIM]{0} fusion(x), kind=kLoop, calls=f0
  u = f32[DIM]{0} fusion(t, y), kind=kLoop, calls=f1
  ROOT r = (f32[DIM]{0}, f32[DIM]{0}) tuple(u, t)
}"""

# A host fallback: an op no kernel computes runs on the evaluator.
RNG = """HloModule rng
ENTRY e {
  x = f32[4]{0} parameter(0)
  lo = f32[] constant(0)
  hi = f32[] constant(1)
  r = f32[4]{0} rng(lo, hi), distribution=rng_uniform
  ROOT s = f32[4]{0} add(x, r)
}"""


@pytest.fixture(scope="module")
def two():
    return {"static": hlocc.compile(TWO_KERNELS.replace("DIM", "6"), "cpu", hlo_passes=False),
            "dynamic": hlocc.compile(TWO_KERNELS.replace("DIM", "?n"), "cpu", hlo_passes=False),
            "reference": hlocc.compile(TWO_KERNELS.replace("DIM", "6"), "interpreter")}


def _inputs(n=6, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)


def _close(got, want):
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)


@pytest.mark.parametrize("kind", ["static", "dynamic"])
def test_fast_and_full_checks_give_the_same_results(two, kind):
    x, y = _inputs()
    want = two["reference"](x, y)
    _close(two[kind](x, y), want)  # the fast path: C-contiguous arrays of the right dtype
    _close(two[kind](x.tolist(), y.tolist()), want)  # lists: the full checks convert them
    strided_x = np.stack([x, x], axis=1)[:, 0]  # not contiguous: the full checks copy it
    assert not strided_x.flags.c_contiguous
    _close(two[kind](strided_x, y), want)


@pytest.mark.parametrize("kind", ["static", "dynamic"])
@pytest.mark.parametrize("args", [
    lambda x, y: (x,),  # count
    lambda x, y: (x.astype(np.float64), y),  # dtype
    lambda x, y: (x, y[None]),  # rank
])
def test_wrong_arguments_raise_the_full_checks_message(two, kind, args):
    x, y = _inputs()
    exe = two[kind]
    exe(x, y)  # the plan exists
    with pytest.raises(ArgumentError) as expected:
        check_arguments(exe.module, args(x, y))
    with pytest.raises(ArgumentError) as got:
        exe(*args(x, y))
    assert str(got.value) == str(expected.value)


@pytest.mark.parametrize("dims, good, bad", [
    ("?n,3", (4, 3), (4, 2)),  # one fixed dimension (its getter gives a number)
    ("2,?n,5", (2, 7, 5), (2, 7, 4)),  # two (a tuple)
    ("?n,?m", (3, 1), None),  # none: any sizes of the rank
])
def test_dynamic_fast_checks_compare_every_fixed_dimension(dims, good, bad):
    """The fast path's fixed-dimension check (compiler.argument_plan) and the binding's key read in
    the same pass (`checked_shapes`): a wrong fixed size gets the full checks' error, sizes seen
    before and new ones run."""
    exe = hlocc.compile(f"HloModule m\nENTRY e {{\n  p = f32[{dims}] parameter(0)\n  ROOT r = f32[{dims}] add(p, p)\n}}\n",
                        "cpu")
    new = tuple(g + 1 if d.startswith("?") else g for d, g in zip(dims.split(","), good))
    for shape in (good, good, new):
        x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        np.testing.assert_array_equal(exe(x), 2 * x)
    if bad is not None:
        x = np.ones(bad, np.float32)
        with pytest.raises(ArgumentError) as expected:
            check_arguments(exe.module, [x])
        with pytest.raises(ArgumentError) as got:
            exe(x)
        assert str(got.value) == str(expected.value)


def test_wrong_shape_message_is_the_documented_one(two):
    x, y = _inputs()
    two["static"](x, y)
    with pytest.raises(ArgumentError, match=r"argument 0: expected shape f32\[6\], got an array of shape \[5\]"):
        two["static"](x[:5].copy(), y)
    with pytest.raises(ArgumentError, match=r"argument 1: expected dtype f32 \(float32\), got int32"):
        two["static"](x, y.astype(np.int32))


@pytest.mark.parametrize("kind", ["static", "dynamic"])
def test_successive_outputs_are_distinct_arrays(two, kind):
    x, y = _inputs()
    first = two[kind](x, y)
    second = two[kind](x + 1, y)
    for a in first:
        for b in second:
            assert not np.shares_memory(a, b)
    _close(first, two["reference"](x, y))  # the second call wrote nothing into the first's result
    _close(second, two["reference"](x + 1, y))


@pytest.mark.parametrize("kind", ["static", "dynamic"])
def test_threads_calling_one_executable_get_their_own_results(two, kind):
    exe = two[kind]
    inputs = [_inputs(seed=k) for k in range(8)]
    with ThreadPoolExecutor(8) as pool:  # a call's exception comes out of map
        results = list(pool.map(lambda k: [exe(*inputs[k]) for _ in range(100)], range(8)))
    for args, calls in zip(inputs, results):
        want = two["reference"](*args)
        for got in calls:
            _close(got, want)


def test_dynamic_program_runs_each_size_through_its_own_plan(two):
    exe = two["dynamic"]
    reference = hlocc.compile(TWO_KERNELS.replace("DIM", "?n"), "interpreter")
    for n in (1, 7, 64, 7):
        x, y = _inputs(n, seed=n)
        _close(exe(x, y), reference(x, y))
    bound = {key[0]: b.calls for key, b in exe.program._bound.items()}
    assert bound[(7,)] is not bound[(64,)]  # each binding its numbers and arenas ...
    assert bound[(7,)].plan is bound[(64,)].plan is exe.program.plan  # ... over one plan, one code


class _CountingEvaluator(thunks.Evaluator):
    made = 0

    def __init__(self, *args, **kwargs):
        type(self).made += 1
        super().__init__(*args, **kwargs)


def test_a_kernel_only_program_makes_no_evaluator_and_plans_its_launches_once(monkeypatch):
    monkeypatch.setenv("HLOCC_NATIVE_CALL", "0")  # the call plan's path (runtime/native_call.py would take it)
    monkeypatch.setattr(thunks, "Evaluator", _CountingEvaluator)
    _CountingEvaluator.made = 0
    exe = hlocc.compile(FIVE.replace("DIM", "4"), "cpu", hlo_passes=False)
    x = np.arange(4, dtype=np.float32)
    for _ in range(10):
        _close([exe(x)], [hlocc.compile(FIVE.replace("DIM", "4"), "interpreter")(x)])
    assert _CountingEvaluator.made == 0
    plan = exe.runner.call_plan()
    assert plan.launchers_built == 5  # one arena, one prepared launch per kernel: none per call


def test_a_host_fallback_still_gets_an_evaluator_per_call(monkeypatch):
    monkeypatch.setattr(thunks, "Evaluator", _CountingEvaluator)
    _CountingEvaluator.made = 0
    exe = hlocc.compile(RNG, "cpu")
    x = np.zeros(4, np.float32)
    first, second = exe(x), exe(x)
    np.testing.assert_array_equal(first, second)  # a fresh evaluator per call: the same numbers
    np.testing.assert_array_equal(first, hlocc.compile(RNG, "interpreter")(x))
    assert _CountingEvaluator.made == 2


@pytest.mark.parametrize("text", [ONE.replace("DIM", "4"), WHILE])
def test_planned_while_and_one_kernel_match_the_evaluator(text):
    x = np.arange(4, dtype=np.float32) - 1.5
    np.testing.assert_allclose(hlocc.compile(text, "cpu")(x), hlocc.compile(text, "interpreter")(x))


def test_a_plan_takes_parameter_addresses_where_every_parameter_is_read_in_place(two):
    """ThunkExecutable.address_plan: the call takes each parameter as the address of its bytes
    (the PyTorch frontend's data_ptr()), with the results of the array call; a program that reads a
    parameter's bytes (a host fallback) has none."""
    x, y = _inputs()
    runner = two["static"].runner
    plan = runner.address_plan()
    assert plan.takes_addresses and "asarray" not in plan.source
    _close(runner.run_addresses([x.ctypes.data, y.ctypes.data]), two["reference"](x, y))
    assert hlocc.compile(RNG, "cpu").runner.address_plan() is None


def test_checked_kernels_run_through_their_plan():
    exe = hlocc.compile(TWO_KERNELS.replace("DIM", "6"), "cpu", hlo_passes=False, check_bounds=True)
    x, y = _inputs()
    _close(exe(x, y), hlocc.compile(TWO_KERNELS.replace("DIM", "6"), "interpreter")(x, y))


def test_large_temporaries_are_allocated_per_call_not_kept(monkeypatch):
    monkeypatch.setenv("HLOCC_NATIVE_CALL", "0")  # the call plan's path (runtime/native_call.py would take it)
    from hlocc.runtime import call_plan

    monkeypatch.setattr(call_plan, "POOLED_TEMP_BYTES", 0)
    text = TWO_KERNELS.replace("DIM", "5").replace(
        "ROOT r = (f32[5]{0}, f32[5]{0}) tuple(u, t)", "ROOT r = f32[2]{0} slice(u), slice={[0:2]}")  # t, u: temporaries
    exe = hlocc.compile(text, "cpu", hlo_passes=False)
    x, y = _inputs(5)
    for _ in range(3):
        _close(exe(x, y), hlocc.compile(text, "interpreter")(x, y))
    plan = exe.runner.call_plan()
    assert plan.scratch and not plan.temps
    assert "scratch = empty(" in plan.source


def test_an_arena_is_freed_without_the_cyclic_collector():
    exe = hlocc.compile(WHILE, "cpu")  # planned nested steps, generic steps and kernels
    exe(np.ones(4, np.float32))
    plan = exe.runner.call_plan()
    arena = weakref.ref(plan._arenas[0])
    gc.disable()
    try:
        plan._arenas.clear()
        assert arena() is None
    finally:
        gc.enable()


def test_an_arena_keeps_the_dimension_values_its_tables_point_at():
    # a bounds-checked kernel is launched per size by `launch_at`, over the kernel's memo of dims
    exe = hlocc.compile(ONE.replace("DIM", "?n"), "cpu", check_bounds=True)
    x = np.arange(5, dtype=np.float32)
    exe(x)
    kernel = exe.program.plan.thunks()[0].kernel.kernel
    dims_table = weakref.ref(kernel._launches[(5,)][0])
    kernel._launches.clear()  # the kernel's memo of launch facts is bounded: a long sweep clears it
    assert dims_table() is not None
    np.testing.assert_array_equal(exe(x), 2 * x)


def test_a_kernel_the_shared_call_launches_itself_leaves_nothing_per_size():
    # A one-version kernel with runtime dims is launched by lines of the shared call: its launch
    # facts are among the binding's numbers and its dims table is the arena's, written each call.
    exe = hlocc.compile(ONE.replace("DIM", "?n"), "cpu")
    sizes = (5, 0, 7, 5, 1, 600_000)  # the last one over the thread pool
    results = [(n, exe(np.arange(n, dtype=np.float32))) for n in sizes]
    for n, got in results:  # each call's result its own, whatever the sizes after it
        np.testing.assert_array_equal(got, 2 * np.arange(n, dtype=np.float32), err_msg=f"size {n}")
    plan = exe.program.plan
    assert plan.shared and plan.bound_kernels() == {} and "    f0(a0, 0, V[" in plan.source
    assert not plan.thunks()[0].kernel.kernel._launches  # no launch facts memoized per size
    assert plan.launchers_built == 1  # one table, in the one arena
