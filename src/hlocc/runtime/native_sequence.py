"""A static program's whole call as one native function (issue 19): every kernel launch, BLAS call
and copy of the program, in order, in one generated LLVM function that the caller enters once.

Why: a call plan (runtime/call_plan.py) runs its steps from Python, one ctypes call per kernel or
gemm (0.3-0.6 µs of argument conversion and GIL release each, with the table patches before it),
plus the plan's own lines (the output buffer and its views). On the PyTorch MLP (three 16-row
gemms, three bias+activation kernels: 16 µs of work) that host path was a sixth of the compiled
graph's call. Here the same steps are direct calls in machine code over tables on the native stack;
the caller passes the parameters' addresses, one address per output buffer (memory it made, e.g. a
fresh tensor's) and one scratch block for the temporaries.

What qualifies (`NativeSequence.of(plan)`): an address plan (`CallPlan.takes_addresses`: static
sizes, every parameter in place, every thunk a planned kernel or an inline copy) whose every
kernel offers `native_calls(count)` (a CPU kernel whose blocks run in the calling thread, a BLAS
gemm: `NativeCall`), whose every output leaf is a whole fresh allocation of its own in the default
layout, and whose run allocates less than what `check_memory` guards. Anything else: None, and the
plan runs as before.

The function, `void f(ptr p_0, ..., ptr p_{n-1}, ptr o_0, ..., ptr o_{m-1}, ptr scratch)`: the
entry's parameters in order (an unused one is ignored), the outputs' buffers in result order, and
the temporaries' block (`scratch_bytes`, ALIGNMENT-aligned; the fresh allocations that hold no
output, too). Constants are literal addresses (the plan's arrays, kept alive here). With
`flush_denormal` (x86-64 only) it sets FTZ/DAZ in MXCSR around the steps and restores the caller's
mode after, which is what `hlocc.torch` did from Python around each call. A kernel table is an
`alloca` of one slot per buffer plus the dims slot (0: static sizes), rewritten before each call:
the function is reentrant, and one temporaries' block per concurrent caller is all the state
(`run` takes one from a pool).
"""

from __future__ import annotations

import ctypes
import platform
from collections.abc import Callable, Sequence
from typing import Any

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

from hlocc.runtime.jit import _LOCK, ObjectEngine, host_target_machine
from hlocc.runtime.native_steps import emit_steps, launch_table, native_steps, step_keep
from hlocc.runtime.plan_parts import own_outputs, round_up, top_level
from hlocc.runtime.thunks import address_of, aligned_bytes

MAX_SCRATCH = 8
"""Temporaries' blocks `run` keeps for reuse (one per thread calling at once)."""
_FTZ_DAZ = 0x8040  # MXCSR's flush-to-zero (bit 15) and denormals-are-zero (bit 6)


class NativeSequence:
    """A static program's call as one native function (module doc): `run(addresses, outputs)`."""

    def __init__(self, source: str, symbol: str, parameters: int, outputs: Sequence[tuple[Any, tuple[int, ...]]],
                 scratch_bytes: int, keep: list, pooled: bool = True):
        self.source, self.parameters, self.outputs = source, parameters, list(outputs)
        self.scratch_bytes = scratch_bytes
        machine = host_target_machine()
        with _LOCK:  # (straight-line calls: instruction selection only, no IR passes)
            module = llvm.parse_assembly(source)
            module.triple, module.data_layout = machine.triple, str(machine.target_data)
            module.verify()
            data = machine.emit_object(module)
        # an engine of its own (0.5 ms), freed with the sequence: one per compiled graph would pile
        # up in the shared engine, which keeps its code for the process's life
        self._loaded = ObjectEngine().load(data, [symbol])
        kind = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * (parameters + len(self.outputs) + 1)))
        self.function = kind(self._loaded.address(symbol))
        self._keep = keep
        # the temporaries' blocks kept for reuse; none past POOLED_TEMP_BYTES (`pooled` False), as
        # the call plan allocates those per call
        self._scratch: list[tuple[np.ndarray | None, int]] = []
        self._pooled = pooled

    @staticmethod
    def of(plan: Any, flush_denormal: bool = False) -> NativeSequence | None:
        """The sequence of a call plan (runtime/call_plan.py CallPlan) that takes addresses, or None
        where one of its steps or outputs has no native form (module doc)."""
        x86 = platform.machine().lower() in ("x86_64", "amd64")
        if not plan.takes_addresses or plan.symbolic or flush_denormal and not x86:
            return None
        calls = native_steps(top_level(plan.program))
        if calls is None:
            return None
        # outputs: each leaf a whole fresh allocation of its own, in the default layout
        output_of, shared, _ = own_outputs(plan.fresh, plan.leaves)  # (the call plan's own arrays)
        if len(output_of) != len(plan.leaves) or any(leaf.axes is not None for leaf in plan.leaves):
            return None
        outputs = [(leaf.dtype, tuple(leaf.dims)) for leaf in plan.leaves]
        # temporaries (and fresh allocations holding no output) in one block
        scratch: dict[int, int] = {}
        size = 0
        for index, bytes_ in [*plan.temps, *((i, s) for i, _, s in shared), *((i, s) for i, _, s in plan.scratch)]:
            scratch[index] = size
            size += round_up(bytes_)
        parameters = {p.allocation: p.number for p in plan.parameters}
        constants = {index: address_of(data) for index, data in plan.constants.items()}
        count = len(plan.module.entry.parameters)

        def base(index: int) -> tuple[str, int]:
            """Allocation `index`'s address: ("param" | "output" | "scratch" | "literal", number)."""
            if index in parameters:
                return "param", parameters[index]
            if index in output_of:
                return "output", output_of[index]
            if index in scratch:
                return "scratch", scratch[index]
            return "literal", constants[index]

        symbol = "hlocc_sequence"
        source = _source(symbol, count, len(outputs), calls, base, scratch, flush_denormal)
        keep = [plan.constants, *step_keep(calls)]
        return NativeSequence(source, symbol, count, outputs, size, keep, pooled=not plan.scratch)

    def run(self, addresses: Sequence[int], outputs: Sequence[int]) -> None:
        """Run with the parameters at `addresses` and the outputs written at `outputs` (buffers of
        each output's dtype and dims, C-contiguous); the caller keeps them all alive over the call."""
        pool = self._scratch
        try:
            block, address = pool.pop()
        except IndexError:
            block = aligned_bytes(self.scratch_bytes) if self.scratch_bytes else None
            address = address_of(block) if block is not None else 0
        try:
            self.function(*addresses, *outputs, address)
        finally:
            if self._pooled and len(pool) < MAX_SCRATCH:
                pool.append((block, address))


def _source(symbol: str, parameters: int, outputs: int, calls: list, base: Callable[[int], tuple[str, int]],
            scratch: dict[int, int], flush: bool) -> str:
    """The LLVM module of the sequence (module doc), built with llvmlite's IR builder: every buffer
    address an i64 (`base(index)`: an argument, the scratch block plus an offset, or a literal;
    then the slice's offset)."""
    i64, void, ptr = ir.IntType(64), ir.VoidType(), ir.PointerType()
    module = ir.Module(name=symbol)
    function = ir.Function(module, ir.FunctionType(void, [ptr] * (parameters + outputs + 1)), symbol)
    b = ir.IRBuilder(function.append_basic_block("entry"))
    table = launch_table(b, calls)
    arguments = [b.ptrtoint(a, i64) for a in function.args]
    starts = {"param": arguments[:parameters], "output": arguments[parameters:parameters + outputs]}
    if flush:
        i32 = ir.IntType(32)
        save = ir.Function(module, ir.FunctionType(void, [ptr]), "llvm.x86.sse.stmxcsr")
        load = ir.Function(module, ir.FunctionType(void, [ptr]), "llvm.x86.sse.ldmxcsr")
        mode, flushed = b.alloca(i32, name="mode"), b.alloca(i32, name="flushed")
        b.call(save, [mode])
        b.store(b.or_(b.load(mode), ir.Constant(i32, _FTZ_DAZ)), flushed)
        b.call(load, [flushed])

    def address(piece: Any) -> ir.Value:
        """The address of a BufferSlice as an i64 (one add where it is off its base)."""
        kind, number = base(piece.allocation_index)
        if kind == "literal":
            return ir.Constant(i64, number + piece.offset)
        if kind == "scratch":
            start, offset = arguments[-1], number + piece.offset
        else:
            start, offset = starts[kind][number], piece.offset
        return b.add(start, ir.Constant(i64, offset)) if offset else start

    emit_steps(b, calls, address, table)
    if flush:
        b.call(load, [mode])
    b.ret_void()
    return str(module)


__all__ = ["MAX_SCRATCH", "NativeSequence"]
