"""A static CPU program's `Executable` call as one native function (runtime/native_sequence.py):
the path `hlocc.torch` has taken since issue 19, for every program that qualifies.

Why: a call plan (runtime/call_plan.py) runs its steps from Python, one ctypes call per kernel or
gemm with the table patches before it, plus its own lines for the arena and the outputs' views.
On a program of many small kernels that host path is most of the call (llama_block_f32 of the JAX
corpus: 15 kernels and 3 gemms on [8, 32] activations), and run after another program, its Python
objects' cache misses add to it.

What it takes: the program's gemms as calls of a bound BLAS (runtime/blas_gemm.py: 2-D products
whose buffers BLAS takes as they are); where none is bound, numpy's own OpenBLAS is bound
(`blas.use_numpy_openblas`: the library numpy's matmul calls, so the same kernels and results);
then `NativeSequence.of` of the address plan, which refuses any program with a step or an output
it cannot make native (symbolic sizes, host fallbacks, control flow other than what it compiles,
an output that is a parameter or a view of another). Per call: each argument must be a
C-contiguous numpy array of its parameter's dtype (what `Executable.checked`'s fast path passes;
anything else returns None and the call plan runs), each output is a fresh `np.empty`, and the
results nest as the entry's result shape. Past CHECKED_ALLOCATION_BYTES of outputs and
temporaries there is none (the call plan checks that memory first). HLOCC_NATIVE_CALL=0, read at
a compiled program's first call, keeps the call plan (an A/B switch).

When: the gemms become BLAS kernels at the first call (`prepare`), which the call plan runs; the
native function is built at the second call (3-20 ms of LLVM instruction selection), as the
few-rows gemm kernel waits for a shape's later calls: a program run once (`hlocc run`, a sweep's
first call at each size) pays nothing for it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from hlocc.runtime import blas
from hlocc.runtime.blas_gemm import with_blas_gemms
from hlocc.runtime.guarded_call import guarded_call
from hlocc.runtime.native_sequence import NativeSequence
from hlocc.runtime.thunks import address_of, nest

NativeCall = Callable[[Sequence[Any]], Any]


def prepare(runner: Any) -> bool:
    """At `runner`'s first call (a ThunkExecutable whose call plan is not built yet): whether a
    native call may be built at its second (module doc); if so, its gemms become BLAS kernel
    thunks now, so that the call plans of both calls run the same program."""
    entry = runner.module.entry
    if os.environ.get("HLOCC_NATIVE_CALL", "") == "0" or any(
            not p.shape.is_array or p.shape.symbols or p.shape.has_bounded_dims for p in entry.parameters):
        return False
    if runner._call_plan is None and blas.use_numpy_openblas():
        runner.program = with_blas_gemms(runner.program)
    return True


def native_call(runner: Any, memory_limit: int) -> NativeCall | None:
    """The call of `runner` (`prepare`d) as one native function (module doc), or None."""
    if runner.fresh_bytes() >= memory_limit:
        return None
    entry = runner.module.entry
    plan = runner.address_plan()
    sequence = NativeSequence.of(plan) if plan is not None else None
    if sequence is None:
        return None
    dtypes = [np.dtype(p.shape.dtype) for p in entry.parameters]
    made = sequence.outputs
    empty, run = np.empty, sequence.run
    shape = entry.root.shape

    def unchecked(args: Sequence[Any]) -> Any:  # (arguments as `call` takes them)
        results = [empty(dims, dtype) for dtype, dims in made]
        run([address_of(a) for a in args], [address_of(r) for r in results])
        return nest(shape, iter(results)) if shape.is_tuple else results[0]

    def call(args: Sequence[Any]) -> Any:
        for a, dtype in zip(args, dtypes):
            if type(a) is not np.ndarray or a.dtype != dtype or not a.flags.c_contiguous:
                return None
        return unchecked(args)
    call.sequence, call.unchecked = sequence, unchecked
    return call


def steady_call(runner: Any, memory_limit: int) -> NativeCall | None | bool:
    """The native call, else the call plan, of `runner` (a ThunkExecutable) behind
    runtime/guarded_call.py's guard of the parameters' exact dtypes and shapes: `Executable.__call__`'s
    fast path. None while the native call is not built (it is at the second call); False where
    neither is taken (a tuple or token parameter, a call that checks its memory first)."""
    native = runner._native
    if native is None or native is True:
        return None
    parameters = runner.module.entry.parameters
    if native is not False:
        call = native.unchecked
    elif runner._call_plan is not None and runner._fresh_bytes < memory_limit and all(
            p.shape.is_array and not p.shape.has_bounded_dims for p in parameters):
        call = runner._call_plan.run
    else:
        return False
    return guarded_call("steady_call", [np.dtype(p.shape.dtype) for p in parameters], ["return call(args)"],
                        {"call": call}, shapes=[p.shape.dims for p in parameters], contiguous=True)


__all__ = ["NativeCall", "native_call", "prepare", "steady_call"]
