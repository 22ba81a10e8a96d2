"""A static CPU program's call as one native function (runtime/native_call.py): which programs get
one, the results against the reference evaluator (a tuple result, a gemm through the bound BLAS,
a result that is a parameter, copied), and the calls that fall back to the call plan (an argument
that is not C-contiguous, HLOCC_NATIVE_CALL=0)."""

import numpy as np

import hlocc
from hlocc.runtime.thunks import KernelThunk

MLP = """HloModule mlp
ENTRY e {
  x = f32[8,32] parameter(0)
  w = f32[32,48] parameter(1)
  b = f32[48] parameter(2)
  d = f32[8,48] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bb = f32[8,48] broadcast(b), dimensions={1}
  s = f32[8,48] add(d, bb)
  z = f32[8,48] broadcast(f32[] constant(0)), dimensions={}
  r = f32[8,48] maximum(s, z)
  m = f32[8] reduce(r, f32[] constant(0)), dimensions={1}, to_apply=add
  ROOT t = (f32[8,48], f32[8]) tuple(r, m)
}
add {
  a = f32[] parameter(0)
  c = f32[] parameter(1)
  ROOT s = f32[] add(a, c)
}"""

PASS_THROUGH = """HloModule pass
ENTRY e {
  x = f32[4] parameter(0)
  y = f32[4] exponential(x)
  ROOT t = (f32[4], f32[4]) tuple(x, y)
}"""


def _args(rng):
    return [rng.integers(-3, 4, s).astype(np.float32) for s in ((8, 32), (32, 48), (48,))]


def _check(got, want):
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6, atol=1e-6)


def test_a_program_of_kernels_and_a_gemm_runs_as_one_native_call():
    text = MLP.replace("HloModule mlp", "HloModule mlp_native")  # (a program no other test has called)
    exe = hlocc.compile(text, "cpu", gemm="library")
    want = hlocc.compile(MLP, "interpreter")(*_args(np.random.default_rng(0)))
    for seed in range(3):  # the first call runs the call plan, the second builds the native call
        args = _args(np.random.default_rng(seed))
        _check(exe(*args), hlocc.compile(MLP, "interpreter")(*args))
        if seed == 0:
            assert exe.runner._native is True
    native = exe.runner._native
    assert native and native.sequence.outputs == [(np.dtype(np.float32), (8, 48)), (np.dtype(np.float32), (8,))]
    assert [t.emitter for t in exe.runner.program.thunks if isinstance(t, KernelThunk)].count("blas") == 1
    first, second = exe(*_args(np.random.default_rng(0))), exe(*_args(np.random.default_rng(0)))
    assert isinstance(first, tuple) and first[0] is not second[0]  # fresh outputs per call
    _check(first, want)


def test_an_argument_the_native_call_cannot_take_goes_through_the_call_plan():
    exe = hlocc.compile(MLP, "cpu", gemm="library")
    x, w, b = _args(np.random.default_rng(1))
    exe(x, w, b)
    exe(x, w, b)
    assert callable(exe.runner._native)
    strided = np.asfortranarray(w)  # not C-contiguous: copied by the checks, or refused by the native call
    _check(exe(x, strided, b), hlocc.compile(MLP, "interpreter")(x, w, b))
    assert exe.runner._native([x, strided, b]) is None  # (the call plan runs it then)


def test_a_result_that_is_a_parameter_is_a_fresh_copy():
    exe = hlocc.compile(PASS_THROUGH, "cpu")
    x = np.linspace(-1, 1, 4, dtype=np.float32)
    got = exe(x)
    _check(got, hlocc.compile(PASS_THROUGH, "interpreter")(x))
    assert got[0] is not x and not np.shares_memory(got[0], x)


def test_switched_off(monkeypatch):
    """HLOCC_NATIVE_CALL=0, read at a compiled program's first call: the call plan runs."""
    monkeypatch.setenv("HLOCC_NATIVE_CALL", "0")
    text = MLP.replace("HloModule mlp", "HloModule mlp_switched_off")  # (not the program cached above)
    exe = hlocc.compile(text, "cpu", gemm="library")
    args = _args(np.random.default_rng(2))
    _check(exe(*args), hlocc.compile(text, "interpreter")(*args))
    assert exe.runner._native is False
