"""A program's steps as machine code: the emission that a torch graph's native sequence
(runtime/native_sequence.py) and a static program's native control flow (runtime/native_loop.py)
share. `native_steps(thunks)` gives each thunk's native form, or None where one has none;
`emit_steps` emits them with llvmlite's IR builder at the builder's position:

    an inline copy (CopyThunk of one size)    a memmove of its bytes
    a kernel with `native_calls(count)`       its launches: direct calls of C functions (NativeCall)
                                              over a stack table of its buffers' addresses
    a WhileThunk                              blocks: the condition's steps, a test of the predicate's
                                              byte, the body's steps, back to the condition
    a ConditionalThunk                        the selector read (a pred's byte: branch 0 when true;
                                              an s32: a switch whose default, any index outside
                                              [0, N - 1), is the last branch, XLA's semantics),
                                              each branch's steps, one join

A kernel that is not one call in the calling thread (runtime dims, a bounds record, blocks the
thread pool would share), a library call other than a BLAS gemm kernel, a host step or another
selector type has no native form.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from llvmlite import ir

from hlocc.codegen.llvm.types import declare_function
from hlocc.runtime.plan_parts import inline_copy, planned_kernel, top_level
from hlocc.runtime.thunks import ALIGNMENT, ConditionalThunk, WhileThunk


@dataclass(frozen=True)
class NativeCall:
    """One launch of a kernel as a call of a C function returning void (`native_calls`):
    `function` its address; each argument passed as a 64-bit integer (a pointer or an integer
    alike in the C calling convention): ("value", v) the literal v, ("buffer", i) the address of
    the thunk's i-th buffer, ("table", 0) the address of a table of all the thunk's buffers'
    addresses and one zero slot after them (a static kernel's dims). `keep`: what the literals
    point into (the kernel's code, a gemm's scalars), kept alive as long as the sequence."""

    function: int
    arguments: tuple[tuple[str, int], ...]
    keep: Any = None


@dataclass(frozen=True)
class NativeWhile:
    """A while loop's native form: its condition's and body's steps."""

    thunk: WhileThunk
    condition: list
    body: list


@dataclass(frozen=True)
class NativeBranches:
    """A conditional's native form: each branch's steps."""

    thunk: ConditionalThunk
    branches: list


def native_steps(thunks: Sequence[Any]) -> list | None:
    """`thunks` as `emit_steps` items (module doc): an inline copy as itself, a kernel as
    (thunk, its NativeCalls), a loop as a NativeWhile, a conditional as NativeBranches; None where
    one has no native form."""
    steps: list = []
    for thunk in thunks:
        if inline_copy(thunk):
            steps.append(thunk)
        elif isinstance(thunk, WhileThunk):
            predicate = thunk.predicate
            if not (predicate.shape.is_array and predicate.shape.element_type.is_pred and predicate.slice.size == 1):
                return None
            condition = native_steps(top_level(thunk.condition))
            body = native_steps(top_level(thunk.body)) if condition is not None else None
            if body is None:
                return None
            steps.append(NativeWhile(thunk, condition, body))
        elif isinstance(thunk, ConditionalThunk):
            selector = thunk.selector.shape.element_type
            if not (selector.is_pred and thunk.selector.slice.size == 1 or selector.name == "s32"):
                return None
            branches = [native_steps(top_level(branch)) for branch in thunk.branches]
            if any(branch is None for branch in branches):
                return None
            steps.append(NativeBranches(thunk, branches))
        else:
            native = getattr(thunk.kernel, "native_calls", None) if planned_kernel(thunk) else None
            launches = native(len(thunk.arguments)) if native is not None else None
            if launches is None:
                return None
            steps.append((thunk, launches))
    return steps


def walk_steps(steps: list):
    """Every step, nested ones included."""
    for step in steps:
        yield step
        if isinstance(step, NativeWhile):
            yield from walk_steps(step.condition)
            yield from walk_steps(step.body)
        elif isinstance(step, NativeBranches):
            for branch in step.branches:
                yield from walk_steps(branch)


def step_slices(steps: list) -> list:
    """The BufferSlices the steps read or write (a predicate and a selector included)."""
    slices = []
    for step in walk_steps(steps):
        if isinstance(step, tuple):
            slices += [ref.slice for ref in step[0].arguments]
        elif isinstance(step, NativeWhile):
            slices.append(step.thunk.predicate.slice)
        elif isinstance(step, NativeBranches):
            slices.append(step.thunk.selector.slice)
        else:
            slices += [step.source, step.destination]
    return slices


def step_keep(steps: list) -> list:
    """What the steps' calls point into, to keep alive with the code."""
    return [call.keep for step in walk_steps(steps) if isinstance(step, tuple) for call in step[1]]


def launch_table(b: ir.IRBuilder, steps: list) -> ir.AllocaInstr:
    """The stack table that `emit_steps` fills before each kernel call: one slot per buffer of the
    widest kernel, and the dims slot."""
    widest = max([len(step[0].arguments) + 1 for step in walk_steps(steps) if isinstance(step, tuple)] + [1])
    table = b.alloca(ir.ArrayType(ir.IntType(64), widest), name="table")
    table.align = ALIGNMENT
    return table


def emit_steps(b: ir.IRBuilder, steps: list, address: Callable[[Any], ir.Value], table: ir.AllocaInstr) -> None:
    """The steps (`native_steps`) at the builder's position, which ends after them;
    `address(slice)` gives a BufferSlice's address as an i64 at the builder's position."""
    i8, i32, i64, void, ptr = ir.IntType(8), ir.IntType(32), ir.IntType(64), ir.VoidType(), ir.PointerType()
    module = b.module
    memmove = declare_function(module, "llvm.memmove.p0.p0.i64", void, [ptr, ptr, i64, ir.IntType(1)])
    function = b.function
    for step in steps:
        if isinstance(step, NativeWhile):
            test, body, done = (function.append_basic_block(name) for name in ("condition", "body", "exit"))
            b.branch(test)
            b.position_at_end(test)
            emit_steps(b, step.condition, address, table)
            flag = b.load(b.inttoptr(address(step.thunk.predicate.slice), ptr), typ=i8)
            b.cbranch(b.icmp_unsigned("!=", flag, ir.Constant(i8, 0)), body, done)
            b.position_at_end(body)
            emit_steps(b, step.body, address, table)
            b.branch(test)
            b.position_at_end(done)
        elif isinstance(step, NativeBranches):
            blocks = [function.append_basic_block(f"branch{k}") for k in range(len(step.branches))]
            join = function.append_basic_block("join")
            where = b.inttoptr(address(step.thunk.selector.slice), ptr)
            if step.thunk.selector.shape.element_type.is_pred:  # true: branch 0
                flag = b.load(where, typ=i8)
                b.cbranch(b.icmp_unsigned("!=", flag, ir.Constant(i8, 0)), blocks[0], blocks[-1])
            else:
                switch = b.switch(b.load(where, typ=i32), blocks[-1])
                for k, block in enumerate(blocks[:-1]):
                    switch.add_case(ir.Constant(i32, k), block)
            for block, branch in zip(blocks, step.branches):
                b.position_at_end(block)
                emit_steps(b, branch, address, table)
                b.branch(join)
            b.position_at_end(join)
        elif not isinstance(step, tuple):  # an inline copy
            destination, source = address(step.destination), address(step.source)
            b.call(memmove, [b.inttoptr(destination, ptr), b.inttoptr(source, ptr), ir.Constant(i64, step.source.size),
                             ir.Constant(ir.IntType(1), 0)])
        else:
            _emit_launches(b, step, address, table)


def _emit_launches(b: ir.IRBuilder, step: tuple, address: Callable[[Any], ir.Value], table: ir.AllocaInstr) -> None:
    i64, void = ir.IntType(64), ir.VoidType()
    thunk, launches = step
    buffers = [address(ref.slice) for ref in thunk.arguments]
    for call in launches:
        values = []
        for kind, value in call.arguments:
            if kind == "value":
                values.append(ir.Constant(i64, value))
            elif kind == "buffer":
                values.append(buffers[value])
            else:  # the table: every buffer, then the dims slot
                for slot, operand in enumerate([*buffers, ir.Constant(i64, 0)]):
                    b.store(operand, b.gep(table, [ir.Constant(i64, 0), ir.Constant(i64, slot)]))
                values.append(b.ptrtoint(table, i64))
        kind = ir.FunctionType(void, [i64] * len(values))
        b.call(b.inttoptr(ir.Constant(i64, call.function), kind.as_pointer()), values)


__all__ = ["NativeBranches", "NativeCall", "NativeWhile", "emit_steps", "launch_table", "native_steps", "step_keep",
           "step_slices", "walk_steps"]
