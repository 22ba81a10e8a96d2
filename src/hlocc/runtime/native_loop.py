"""A static program's control flow as native functions: a while loop (its condition's steps, the
predicate's test and its body's steps, iteration after iteration) or a conditional (the selector's
test and the chosen branch's steps) in one generated LLVM function that the call plan
(runtime/call_plan.py) enters once per execution of the thunk.

Why: the planned loop (`WhileThunk.loop` over the call plan's steps) runs each iteration from
Python: a step per kernel (its table patches and a ctypes call), a memmove per copy and a read of
the predicate's byte, about 1 µs each. JAX's `fori_loop`, `scan` and `while_loop` bodies are
often a few small kernels, so that host work was most of their time: the corpus's
`while_bisection` (16 iterations of a condition kernel, two body kernels and three copies over 50
elements) took 85 µs against XLA:CPU's 22 µs, whose while loop runs in its own C++ runtime. Here
an iteration is direct calls in machine code (runtime/native_steps.py, the emission a torch
graph's native sequence uses too).

What qualifies (`NativeControl.of(thunk)`): every step inside, nested loops and conditionals
included, has a native form (`native_steps`: inline copies, kernels that run as native calls in
the calling thread); the predicate is one byte, a selector a pred or an s32. Anything else: None,
and the thunk runs as before.

The function, `void f(ptr base)`: `base[k]` is the address of the k-th allocation the steps touch
(`NativeControl.used`), which the call plan's step fills: once per arena for the temporaries and
constants, per call for the parameters' and outputs' allocations. Every buffer address is
`base[k]` plus the slice's offset; the function has no other state, so one serves every arena
and thread.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import llvmlite.binding as llvm
from llvmlite import ir

from hlocc.runtime.jit import _LOCK, ObjectEngine, host_target_machine
from hlocc.runtime.native_steps import emit_steps, launch_table, native_steps, step_keep, step_slices
from hlocc.runtime.thunks import ConditionalThunk, WhileThunk

_SYMBOL = "hlocc_control"


class NativeControl:
    """A while loop or a conditional as one native function (module doc): `function(address of base)`."""

    def __init__(self, source: str, used: tuple[int, ...], keep: list):
        self.source, self.used = source, used
        machine = host_target_machine()
        with _LOCK:  # (calls and branches: instruction selection only, no IR passes)
            module = llvm.parse_assembly(source)
            module.triple, module.data_layout = machine.triple, str(machine.target_data)
            module.verify()
            data = machine.emit_object(module)
        self._loaded = ObjectEngine().load(data, [_SYMBOL])  # freed with the loop (native_sequence.py)
        self.function = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(self._loaded.address(_SYMBOL))
        self._keep = keep

    @staticmethod
    def of(thunk: WhileThunk | ConditionalThunk) -> NativeControl | None:
        """The native form of `thunk`, or None where a step inside has none (module doc)."""
        steps = native_steps([thunk])
        if steps is None:
            return None
        used = tuple(sorted({piece.allocation_index for piece in step_slices(steps)}))
        return NativeControl(_source(steps, {index: k for k, index in enumerate(used)}), used, step_keep(steps))

    def step(self, fixed: Sequence[int | None], variable: Sequence[tuple[int, int]]) -> Any:
        """A call plan's step running the loop: `fixed[k]` the address of `used[k]` where an arena
        holds it (None where the call gives it); `variable` (position in `used`, allocation index)
        for those, read from the call's memory (`memory.addresses`)."""
        base = (ctypes.c_uint64 * max(1, len(self.used)))()
        for k, address in enumerate(fixed):
            if address is not None:
                base[k] = address
        function, address, patches = self.function, ctypes.addressof(base), tuple(variable)

        def run(memory: Any) -> None:
            addresses = memory.addresses
            for k, index in patches:
                base[k] = addresses[index]
            function(address)
        run.keep = (base, self)  # the table and the code live as long as the step
        return run


def _source(steps: list, position: dict[int, int]) -> str:
    """The function's LLVM module (module doc), built with llvmlite's IR builder."""
    i64, void, ptr = ir.IntType(64), ir.VoidType(), ir.PointerType()
    module = ir.Module(name=_SYMBOL)
    function = ir.Function(module, ir.FunctionType(void, [ptr]), _SYMBOL)
    b = ir.IRBuilder(function.append_basic_block("entry"))
    table = launch_table(b, steps)
    base = function.args[0]

    def address(piece: Any) -> ir.Value:
        start = b.load(b.gep(base, [ir.Constant(i64, position[piece.allocation_index])], source_etype=i64), typ=i64)
        return b.add(start, ir.Constant(i64, piece.offset)) if piece.offset else start

    emit_steps(b, steps, address, table)
    b.ret_void()
    return str(module)


__all__ = ["NativeControl"]
