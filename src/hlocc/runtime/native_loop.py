"""A while loop of a static program as one native function: its condition's steps, the predicate's
test and its body's steps, iteration after iteration, in one generated LLVM function that the call
plan (runtime/call_plan.py) enters once per execution of the loop.

Why: the planned loop (`WhileThunk.loop` over the call plan's steps) runs each iteration from
Python: a step per kernel (its table patches and a ctypes call), a memmove per copy and a read of
the predicate's byte, about 1 µs each. JAX's `fori_loop`, `scan` and `while_loop` bodies are
often a few small kernels, so that host work was most of their time: the corpus's
`while_bisection` (16 iterations of a condition kernel, two body kernels and three copies over 50
elements) took 85 µs against XLA:CPU's 22 µs, whose while loop runs in its own C++ runtime. Here
an iteration is direct calls in machine code (runtime/native_sequence.py's `emit_calls`, the same
calls a torch graph's native sequence makes).

What qualifies (`NativeLoop.of(thunk)`): every step of the condition and of the body is an inline
copy or a kernel that runs as native calls in the calling thread (`native_calls`: static sizes, no
bounds record, blocks the pool would not share); nested sequences are spliced in; the predicate is
one byte. A nested while or conditional, a library call or a host fallback: None, and the loop runs
as before.

The function, `void loop(ptr base)`: `base[k]` is the address of the k-th allocation the loop's
steps touch (`NativeLoop.used`), which the call plan's step fills: once per arena for the
temporaries and constants, per call for the parameters' and outputs' allocations. Every buffer
address is `base[k]` plus the slice's offset; the loop has no other state, so one function serves
every arena and thread.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import llvmlite.binding as llvm
from llvmlite import ir

from hlocc.runtime.jit import _LOCK, ObjectEngine, host_target_machine
from hlocc.runtime.native_sequence import emit_calls, launch_table, native_calls_of
from hlocc.runtime.plan_parts import top_level
from hlocc.runtime.thunks import WhileThunk

_SYMBOL = "hlocc_while"


class NativeLoop:
    """A while loop as one native function (module doc): `function(address of base)`."""

    def __init__(self, source: str, used: tuple[int, ...], keep: list):
        self.source, self.used = source, used
        machine = host_target_machine()
        with _LOCK:  # (straight-line calls in a loop: instruction selection only, no IR passes)
            module = llvm.parse_assembly(source)
            module.triple, module.data_layout = machine.triple, str(machine.target_data)
            module.verify()
            data = machine.emit_object(module)
        self._loaded = ObjectEngine().load(data, [_SYMBOL])  # freed with the loop (native_sequence.py)
        self.function = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(self._loaded.address(_SYMBOL))
        self._keep = keep

    @staticmethod
    def of(thunk: WhileThunk) -> NativeLoop | None:
        """The native form of `thunk`, or None where one of its steps has none (module doc)."""
        predicate = thunk.predicate
        if not (predicate.shape.is_array and predicate.shape.element_type.is_pred and predicate.slice.size == 1):
            return None
        condition = native_calls_of(top_level(thunk.condition))
        body = native_calls_of(top_level(thunk.body)) if condition is not None else None
        if body is None:
            return None
        slices = [predicate.slice]
        for item in (*condition, *body):
            if isinstance(item, tuple):
                slices += [ref.slice for ref in item[0].arguments]
            else:
                slices += [item.source, item.destination]
        used = tuple(sorted({piece.allocation_index for piece in slices}))
        keep = [c.keep for item in (*condition, *body) if isinstance(item, tuple) for c in item[1]]
        return NativeLoop(_source(condition, body, predicate.slice, {index: k for k, index in enumerate(used)}),
                          used, keep)

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


def _source(condition: list, body: list, predicate: Any, position: dict[int, int]) -> str:
    """The loop's LLVM module (module doc), built with llvmlite's IR builder."""
    i8, i64, void, ptr = ir.IntType(8), ir.IntType(64), ir.VoidType(), ir.PointerType()
    module = ir.Module(name=_SYMBOL)
    function = ir.Function(module, ir.FunctionType(void, [ptr]), _SYMBOL)
    entry = function.append_basic_block("entry")
    test, run_body, done = (function.append_basic_block(name) for name in ("condition", "body", "exit"))
    b = ir.IRBuilder(entry)
    table = launch_table(b, [*condition, *body])
    base = function.args[0]

    def address(piece: Any) -> ir.Value:
        start = b.load(b.gep(base, [ir.Constant(i64, position[piece.allocation_index])], source_etype=i64), typ=i64)
        return b.add(start, ir.Constant(i64, piece.offset)) if piece.offset else start

    b.branch(test)
    b.position_at_end(test)
    emit_calls(b, condition, address, table)
    flag = b.load(b.inttoptr(address(predicate), ptr), typ=i8)
    b.cbranch(b.icmp_unsigned("!=", flag, ir.Constant(i8, 0)), run_body, done)
    b.position_at_end(run_body)
    emit_calls(b, body, address, table)
    b.branch(test)
    b.position_at_end(done)
    b.ret_void()
    return str(module)


__all__ = ["NativeLoop"]
