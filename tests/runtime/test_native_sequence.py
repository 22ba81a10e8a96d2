"""A static program's call as one native function (runtime/native_sequence.py): kernels with a
temporary and a constant between them, a copy, BLAS gemms in every layout the kernel thunks take,
the denormal mode set for the call and restored, temporaries per concurrent caller, and the
programs it refuses. Numerics against the evaluator (the interpreter backend)."""

from __future__ import annotations

import gc
import weakref
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from test_call_plan import RNG, TWO_KERNELS
from test_library import DOT_CASES, _operands, dot_module

import hlocc
from hlocc.evaluator import Evaluator
from hlocc.hlo.parser import parse_hlo
from hlocc.runtime import library
from hlocc.runtime.blas_gemm import with_blas_gemms
from hlocc.runtime.native_sequence import NativeSequence

# a temporary (t), a constant (in f1), a copy of a parameter into an output
WITH_COPY = TWO_KERNELS.replace("ROOT r = (f32[DIM]{0}, f32[DIM]{0}) tuple(u, t)",
                                "c = f32[DIM]{0} copy(y)\n  ROOT r = (f32[DIM]{0}, f32[DIM]{0}) tuple(u, c)")


def _sequence(text: str, flush: bool = False, **options) -> NativeSequence | None:
    plan = hlocc.compile(text, "cpu", hlo_passes=False, **options).runner.address_plan()
    return NativeSequence.of(plan, flush) if plan is not None else None


def _run(sequence: NativeSequence, *inputs: np.ndarray) -> list[np.ndarray]:
    outputs = [np.full(dims, np.nan, dtype) for dtype, dims in sequence.outputs]
    sequence.run([a.ctypes.data for a in inputs], [o.ctypes.data for o in outputs])
    return outputs


@pytest.mark.parametrize("text", [TWO_KERNELS, WITH_COPY, TWO_KERNELS.replace("tuple(u, t)", "tuple(u, x)")],
                         ids=["kernels", "copy", "parameter"])
def test_kernels_a_temporary_a_constant_and_a_copy(text):
    text = text.replace("DIM", "6")
    sequence = _sequence(text)
    assert sequence is not None and sequence.outputs == [(np.float32, (6,))] * 2
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal(6).astype(np.float32) for _ in range(2))
    want = [np.array(w) for w in hlocc.compile(text, "interpreter")(x, y)]
    for _ in range(2):  # the second call reuses the temporaries' block
        for g, w in zip(_run(sequence, x, y), want):
            np.testing.assert_allclose(g, w, rtol=1e-6)
    if "tuple(u, x)" in text:  # the parameter's value: copied into the output at each call
        x[:] = 7
        np.testing.assert_array_equal(_run(sequence, x, y)[1], x)


def test_concurrent_callers_have_their_own_temporaries():
    text = TWO_KERNELS.replace("DIM", "4096")
    sequence = _sequence(text)
    reference = hlocc.compile(text, "interpreter")

    def call(seed):
        rng = np.random.default_rng(seed)
        x, y = (rng.standard_normal(4096).astype(np.float32) for _ in range(2))
        for _ in range(20):
            got = _run(sequence, x, y)
        return got, reference(x, y)

    with ThreadPoolExecutor(4) as pool:
        for got, want in pool.map(call, range(8)):
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=1e-6)


def _flushed() -> bool:
    return np.float32(1e-39) * np.float32(1.0) == 0


@pytest.mark.parametrize("flush", [True, False])
def test_denormals_are_flushed_for_the_call_and_the_mode_restored(flush):
    """exp(-100) is a denormal (3.7e-44), 0 when flushed; the caller's mode is the same after."""
    text = "HloModule e\nENTRY e {\n  x = f32[4]{0} parameter(0)\n  ROOT r = f32[4]{0} exponential(x)\n}"
    sequence = _sequence(text, flush)
    (got,) = _run(sequence, np.full(4, -100.0, np.float32))
    assert not _flushed()
    assert (got == 0).all() if flush else (got > 0).all()


def test_programs_without_a_native_form_are_refused():
    """A host fallback has no address plan; a kernel whose blocks go over the thread pool has no
    native form (nor has an output in a layout other than row-major: the BLAS test below)."""
    assert hlocc.compile(RNG, "cpu").runner.address_plan() is None
    big = TWO_KERNELS.replace("DIM", str(1 << 20))  # past PARALLEL_MIN_ELEMENTS: the pool's blocks
    assert _sequence(big) is None


    library._GEMM_CALLS.clear()


@pytest.mark.parametrize("name", ["matmul", "matmul_transposed_lhs", "matmul_transposed_rhs"])
def test_blas_gemms_of_every_transposition(mkl, name):
    """The BLAS kernel thunks (runtime/blas_gemm.py) as Fortran calls of the sequence; the results
    the evaluator's. An output in another layout than row-major has no native form."""
    case = DOT_CASES[name]
    text = dot_module(*case)
    runner = hlocc.compile(text, "cpu", gemm="library").runner
    runner.program = with_blas_gemms(runner.program)
    sequence = NativeSequence.of(runner.address_plan())
    lhs, rhs = _operands(case, (np.float32,) * 3)
    (got,) = _run(sequence, lhs, rhs)
    np.testing.assert_allclose(got, np.asarray(Evaluator().run(parse_hlo(text), [lhs, rhs])), rtol=1e-5, atol=1e-5)
    column_major = hlocc.compile(dot_module(*case, layouts=(None, None, (0, 1))), "cpu", gemm="library").runner
    column_major.program = with_blas_gemms(column_major.program)
    assert NativeSequence.of(column_major.address_plan()) is None


def test_a_sequence_s_code_is_freed_with_it():
    """Each sequence has an engine of its own (not the process-wide one, which keeps its code)."""
    sequence = _sequence(TWO_KERNELS.replace("DIM", "6"))
    engine = weakref.ref(sequence._loaded.engine)
    del sequence
    gc.collect()
    assert engine() is None
