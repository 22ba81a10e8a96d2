"""Gemm thunks as kernel thunks of the bound BLAS (runtime/blas.py): a static program's matrix
products whose buffers' layouts BLAS takes as they are become `KernelThunk`s of a `BlasGemmKernel`,
whose launcher's table holds the three addresses (lhs, rhs, output), so that the call plan
(runtime/call_plan.py) patches them like any kernel's and calls `run()`: one Fortran call per gemm,
without a GemmThunk's path through HostMemory, the views of its buffers and its plan lookup (3-4 µs
a gemm in Python, as much as a small layer's product).

`with_blas_gemms(program)` makes the substitution (its thunks' views and layouts worked out once,
at compile time, from the buffers' shapes); the gemms it leaves (batched, converted, strided past
what BLAS takes, or with no BLAS bound) stay GemmThunks.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

from hlocc.runtime import blas, library
from hlocc.runtime.native_steps import NativeCall
from hlocc.runtime.thunks import GemmThunk, KernelThunk, SequentialThunk


@dataclass(frozen=True)
class BlasGemmKernel:
    """One gemm's BLAS call as a kernel (runtime/thunks.py Kernel): buffers lhs, rhs, output."""

    name: str
    layout: blas.GemmLayout
    emitter: str = "blas"
    output_aliases: tuple[tuple[int, int], ...] = ()

    def run_addresses(self, addresses: list[int]) -> None:
        self.layout.run(*addresses[:3])

    def launcher(self, count: int) -> _Launch:
        return _Launch(self.layout)

    def native_calls(self, count: int) -> tuple[NativeCall, ...]:
        """The gemm as a call a native sequence makes (runtime/native_sequence.py): the Fortran
        function on the layout's argument addresses, the three matrices' slots the buffers'."""
        buffers = {6: 0 if self.layout.swap else 1, 8: 1 if self.layout.swap else 0, 11: 2}
        arguments = tuple(("buffer", buffers[slot]) if slot in buffers else ("value", value)
                          for slot, value in enumerate(self.layout.args))
        return (NativeCall(ctypes.cast(self.layout.function, ctypes.c_void_p).value, arguments, keep=self.layout),)


class _Launch:
    """A prepared BLAS call (runtime/thunks.py KernelLauncher): `table` [lhs, rhs, output]."""

    __slots__ = ("table", "run", "layout")  # (the layout keeps alive the ints its arguments point at)

    def __init__(self, layout: blas.GemmLayout):
        table = [0, 0, 0]
        args = list(layout.args)
        function = layout.function
        first, second = (0, 1) if layout.swap else (1, 0)  # slot 6 takes w (rhs) unless swapped

        def run() -> None:
            args[6], args[8], args[11] = table[first], table[second], table[2]
            function(*args)

        self.table, self.run, self.layout = table, run, layout


def blas_kernel(thunk: GemmThunk) -> KernelThunk | None:
    """The kernel thunk of a gemm BLAS runs on its buffers as they are, or None."""
    refs = (thunk.output, thunk.lhs, thunk.rhs)
    if not blas.bound() or any(0 in r.shape.dims or not r.shape.is_array for r in refs):
        return None
    out, lhs, rhs = (library._stand_in(library._BufferView.of(r)) for r in refs)
    plan = library._gemm_plan(out, lhs, rhs, *thunk.dims)
    layout = library._blas_layout(plan, out, lhs, rhs)
    if layout is None:
        return None
    return KernelThunk(thunk.instr_name, "blas", BlasGemmKernel(thunk.instr_name, layout),
                       [thunk.lhs, thunk.rhs, thunk.output])


def with_blas_gemms(program: SequentialThunk) -> SequentialThunk:
    """`program` with its top-level gemm thunks that BLAS runs directly as kernel thunks (module doc)."""
    thunks = [(blas_kernel(t) or t) if isinstance(t, GemmThunk) else t for t in program.thunks]
    return SequentialThunk(thunks)


__all__ = ["BlasGemmKernel", "blas_kernel", "with_blas_gemms"]
