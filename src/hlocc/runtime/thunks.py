"""Thunks: the steps an Executable runs over its allocated buffers (seed 002; XLA's Thunk kinds,
xla/backends/gpu/runtime/thunk.h).

A thunk reads and writes arrays at buffer slices (`BufferRef`: a `BufferSlice` of the buffer
assignment and the array's shape, whose layout gives the order of the bytes). At run time the
`Memory` holds one byte array per allocation: the caller's parameters, the executable's constants,
fresh outputs and one temp arena per run. The kinds:

- KernelThunk: a generated kernel; its arguments are the slices of the fusion's operands then
  outputs, passed as raw addresses (no Python object per element).
- GemmThunk / ConvolutionThunk: library calls (runtime/library.py) on views of the buffers.
- CopyThunk: bytes from one slice to another (boundary copies, layout-preserving `copy`).
- WhileThunk / ConditionalThunk / SequentialThunk: control flow over nested thunk sequences.
- HostThunk: an op (or a fusion) with no kernel yet, run by the reference evaluator on views of
  the buffers — correct, slow, and listed by `hlocc run --stats` so the gap stays visible.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from hlocc.evaluator.core import TOKEN, Evaluator
from hlocc.hlo.ir import HloComputation, HloInstruction
from hlocc.hlo.types import Shape
from hlocc.runtime import library
from hlocc.runtime.buffer_assignment import BufferSlice

# -- memory --------------------------------------------------------------------------------------

ALIGNMENT = 64
"""Bytes every allocation is aligned to (the buffer assignment aligns offsets in the arena)."""


def aligned_bytes(size: int) -> np.ndarray:
    """`size` uninitialized bytes starting at an ALIGNMENT-byte boundary."""
    raw = np.empty(size + ALIGNMENT, dtype=np.uint8)
    start = -raw.ctypes.data % ALIGNMENT
    return raw[start:start + size]


@dataclass
class Memory:
    """The byte array of every allocation for one run, and the evaluator host thunks use."""

    allocations: list[np.ndarray]
    evaluator: Evaluator
    addresses: list[int] = field(init=False)

    def __post_init__(self) -> None:
        self.addresses = [a.ctypes.data for a in self.allocations]

    def bytes(self, where: BufferSlice) -> np.ndarray:
        return self.allocations[where.allocation_index][where.offset:where.offset + where.size]

    def address(self, where: BufferSlice) -> int:
        return self.addresses[where.allocation_index] + where.offset


@dataclass(frozen=True)
class BufferRef:
    """The array of `shape` (an array or token leaf, with its layout) stored at `slice`."""

    slice: BufferSlice
    shape: Shape

    def physical(self, memory: Memory) -> np.ndarray:
        """A view in physical (major-to-minor) order: C-contiguous over the slice's bytes."""
        dims = [self.shape.dims[d] for d in reversed(self.shape.minor_to_major)]
        return memory.bytes(self.slice).view(self.shape.dtype).reshape(dims)

    def logical(self, memory: Memory) -> Any:
        """A view in logical dimension order (strided for a non-default layout); TOKEN for a token."""
        if not self.shape.is_array:
            return TOKEN
        order = list(reversed(self.shape.minor_to_major))
        view = self.physical(memory)
        return view if order == sorted(order) else np.transpose(view, np.argsort(order))

    def __str__(self) -> str:
        return f"{self.shape}@{self.slice}"


@dataclass(frozen=True)
class ValueRefs:
    """Where a (possibly tuple-shaped) value lives: a BufferRef per leaf, nested like the shape."""

    shape: Shape
    leaves: tuple[BufferRef, ...]

    def read(self, memory: Memory) -> Any:
        return nest(self.shape, iter([ref.logical(memory) for ref in self.leaves]))

    def write(self, memory: Memory, value: Any) -> None:
        for ref, v in zip(self.leaves, flatten(self.shape, value)):
            if ref.shape.is_array:
                np.copyto(ref.logical(memory), np.asarray(v), casting="unsafe")


def nest(shape: Shape, leaves) -> Any:
    """The values of iterator `leaves` nested like `shape` (a tuple per tuple shape). A plain
    recursive function on purpose: a recursive closure is a reference cycle, which would keep a
    run's memory alive until the cyclic garbage collector ran."""
    if shape.is_tuple:
        return tuple(nest(s, leaves) for s in shape.tuple_shapes)
    return next(leaves)


def flatten(shape: Shape, value: Any) -> list:
    """The leaves of a value nested like `shape`, in order."""
    if not shape.is_tuple:
        return [value]
    return [leaf for s, item in zip(shape.tuple_shapes, value) for leaf in flatten(s, item)]


# -- thunks --------------------------------------------------------------------------------------


class Thunk(Protocol):
    kind: str

    def execute(self, memory: Memory) -> None: ...

    def describe(self) -> list[str]: ...


class Kernel(Protocol):
    """What a backend compiles a fusion into (backends/cpu/kernel.py CompiledKernel)."""

    name: str

    def run_addresses(self, addresses: list[int]) -> None: ...


def _args(refs) -> str:
    return ", ".join(str(r) for r in refs)


@dataclass
class KernelThunk:
    instr_name: str
    emitter: str
    kernel: Kernel
    arguments: list[BufferRef]  # the fusion's parameters, then its outputs
    kind: str = "kernel"

    def execute(self, memory: Memory) -> None:
        self.kernel.run_addresses([memory.address(r.slice) for r in self.arguments])

    def describe(self) -> list[str]:
        return [f"kernel {self.instr_name} ({self.emitter} emitter): {_args(self.arguments)}"]


@dataclass
class GemmThunk:
    instr_name: str
    lhs: BufferRef
    rhs: BufferRef
    output: BufferRef
    dims: tuple[tuple[int, ...], ...]  # lhs/rhs contracting, lhs/rhs batch
    kind: str = "gemm"

    def execute(self, memory: Memory) -> None:
        library.gemm(self.output.logical(memory), self.lhs.logical(memory), self.rhs.logical(memory), *self.dims)

    def describe(self) -> list[str]:
        return [f"gemm {self.instr_name}: {_args([self.lhs, self.rhs])} -> {self.output}"]


@dataclass
class ConvolutionThunk:
    instr_name: str
    lhs: BufferRef
    rhs: BufferRef
    output: BufferRef
    window: tuple
    dnums: Any
    feature_groups: int
    batch_groups: int
    kind: str = "convolution"

    def execute(self, memory: Memory) -> None:
        library.convolution(self.output.logical(memory), self.lhs.logical(memory), self.rhs.logical(memory),
                            self.window, self.dnums, self.feature_groups, self.batch_groups)

    def describe(self) -> list[str]:
        return [f"convolution {self.instr_name}: {_args([self.lhs, self.rhs])} -> {self.output}"]


@dataclass
class CopyThunk:
    source: BufferSlice
    destination: BufferSlice
    why: str
    kind: str = "copy"

    def execute(self, memory: Memory) -> None:
        np.copyto(memory.bytes(self.destination), memory.bytes(self.source))

    def describe(self) -> list[str]:
        return [f"copy ({self.why}): {self.source} -> {self.destination}"]


@dataclass
class SequentialThunk:
    thunks: list[Thunk]
    kind: str = "sequential"

    def execute(self, memory: Memory) -> None:
        for thunk in self.thunks:
            thunk.execute(memory)

    def describe(self) -> list[str]:
        return [line for t in self.thunks for line in t.describe()]

    def walk(self):
        """Every thunk, nested ones included, in program order."""
        for thunk in self.thunks:
            yield thunk
            for child in getattr(thunk, "children", lambda: ())():
                yield from child.walk()


def _indent(lines: list[str]) -> list[str]:
    return ["  " + line for line in lines]


@dataclass
class WhileThunk:
    """Run `condition`, read the predicate it computed, and while it is true run `body` (which ends
    with the copies of its root into the loop state)."""

    instr_name: str
    condition: SequentialThunk
    predicate: BufferRef
    body: SequentialThunk
    kind: str = "while"

    def execute(self, memory: Memory) -> None:
        predicate = self.predicate.physical(memory)
        while True:
            self.condition.execute(memory)
            if not predicate.item():
                return
            self.body.execute(memory)

    def children(self) -> tuple[SequentialThunk, ...]:
        return self.condition, self.body

    def describe(self) -> list[str]:
        return ([f"while {self.instr_name}: condition"] + _indent(self.condition.describe())
                + [f"  predicate {self.predicate}", "body"] + _indent(self.body.describe()))


@dataclass
class ConditionalThunk:
    """Run the branch the selector picks: a pred picks branch 0 when true and 1 when false; an index
    out of [0, N) picks the last branch (XLA's semantics)."""

    instr_name: str
    selector: BufferRef
    branches: list[SequentialThunk]
    kind: str = "conditional"

    def execute(self, memory: Memory) -> None:
        value = self.selector.physical(memory).item()
        if self.selector.shape.element_type.is_pred:
            branch = 0 if value else 1
        else:
            branch = value if 0 <= value < len(self.branches) else len(self.branches) - 1
        self.branches[branch].execute(memory)

    def children(self) -> tuple[SequentialThunk, ...]:
        return tuple(self.branches)

    def describe(self) -> list[str]:
        lines = [f"conditional {self.instr_name} on {self.selector}:"]
        for k, branch in enumerate(self.branches):
            lines += [f"  branch {k}"] + _indent(_indent(branch.describe()))
        return lines


@dataclass
class HostThunk:
    """`instr` (or, for a fusion, its fused computation) run by the reference evaluator."""

    instr: HloInstruction
    operands: list[ValueRefs]
    output: ValueRefs
    reason: str
    kind: str = "host"

    def execute(self, memory: Memory) -> None:
        values = [o.read(memory) for o in self.operands]
        computation: HloComputation | None = (self.instr.fused_computation if self.instr.opcode == "fusion"
                                              else None)
        if computation is not None:
            result = memory.evaluator.call(computation, values)
        else:
            result = memory.evaluator.evaluate_instruction(self.instr, values)
        self.output.write(memory, result)

    def describe(self) -> list[str]:
        return [f"host {self.instr.name} ({self.instr.opcode}, by the evaluator: {self.reason})"]


__all__ = [
    "ALIGNMENT", "BufferRef", "ConditionalThunk", "ConvolutionThunk", "CopyThunk", "GemmThunk", "HostThunk",
    "KernelThunk", "Memory", "SequentialThunk", "Thunk", "ValueRefs", "WhileThunk", "aligned_bytes",
]
