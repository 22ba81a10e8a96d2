"""Thunks: the steps an Executable runs over its allocated buffers (seed 002; XLA's Thunk kinds,
xla/backends/gpu/runtime/thunk.h).

A thunk reads and writes arrays at buffer slices (`BufferRef`: a `BufferSlice` of the buffer
assignment and the array's shape, whose layout gives the order of the bytes). At run time a
`Memory` holds one buffer per allocation (the caller's parameters, the executable's constants,
fresh outputs and one temp arena per run), and thunks touch it only through its methods: the
address of a slice (kernel arguments), a copy between slices, reading a value to the host and
writing one back (host fallbacks, control-flow predicates), a kernel launch and the library calls.
Two implementations: `HostMemory` (numpy byte arrays: reads are views, nothing is copied) and
the device memory of backends/cuda/memory.py (device buffers; reads and writes are transfers).
The kinds:

- KernelThunk: a generated kernel; its arguments are the slices of the fusion's operands then
  outputs, passed as raw addresses (no Python object per element).
- GemmThunk / ConvolutionThunk: library calls (`memory.gemm`, `memory.convolution`; on the host
  runtime/library.py on views of the buffers).
- LibraryThunk: a host library call (sort, top-k: runtime/library.py) from the operands read to
  the outputs written back.
- CopyThunk: bytes from one slice to another (boundary copies, layout-preserving `copy`).
- WhileThunk / ConditionalThunk / SequentialThunk: control flow over nested thunk sequences.
- HostThunk: an op (or a fusion) with no kernel yet, run by the reference evaluator on the values
  read from memory (views on the host, copies from a device), its result written back — correct,
  slow, and listed by `hlocc run --stats` so the gap stays visible.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
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


def address_of(array: np.ndarray) -> int:
    """The address of `array`'s first byte. A writable array's through ctypes' buffer protocol
    (a third of `array.ctypes.data`'s cost, which builds a helper object per call)."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(array))
    except (TypeError, ValueError, BufferError):  # read-only, empty, or not contiguous
        return array.ctypes.data


def aligned_bytes(size: int) -> np.ndarray:
    """`size` uninitialized bytes starting at an ALIGNMENT-byte boundary."""
    raw = np.empty(size + ALIGNMENT, dtype=np.uint8)
    start = -address_of(raw) % ALIGNMENT
    return raw[start:start + size]


class Memory(Protocol):
    """One run's buffers, as the thunks see them (module doc). Every method takes slices or refs of
    the buffer assignment; `read` returns a host array in logical order (TOKEN for a token), which
    the caller must not keep past the next thunk (on the host it is a view of the buffer)."""

    evaluator: Evaluator

    def address(self, where: BufferSlice) -> int: ...

    def copy(self, source: BufferSlice, destination: BufferSlice) -> None: ...

    def read(self, ref: BufferRef) -> Any: ...

    def write(self, ref: BufferRef, value: Any) -> None: ...

    def launch(self, kernel: Kernel, addresses: list[int]) -> None: ...

    def gemm(self, output: BufferRef, lhs: BufferRef, rhs: BufferRef, dims: tuple[tuple[int, ...], ...]) -> None: ...

    def convolution(self, thunk: ConvolutionThunk) -> None: ...


class EvaluatorOnDemand:
    """A run's evaluator (for its host fallbacks), made on first use from `seed`: a run without
    host fallbacks never needs one, and making one (its random generator) costs ~15 µs. Host and
    device memories both hold one."""

    __slots__ = ()

    @property
    def evaluator(self) -> Evaluator:
        if self._evaluator is None:
            self._evaluator = Evaluator(self.seed)
        return self._evaluator


class HostMemory(EvaluatorOnDemand):
    """Memory in host byte arrays, one per allocation: reads are views, kernels run on the host.
    `addresses`: the allocations' addresses, when the caller knows them (runtime/call_plan.py);
    the evaluator is made on first use (EvaluatorOnDemand)."""

    __slots__ = ("allocations", "addresses", "seed", "_evaluator")

    def __init__(self, allocations: list[np.ndarray], evaluator: Evaluator | None = None,
                 addresses: list[int] | None = None, seed: int = 0):
        self.allocations = allocations
        self.addresses = addresses if addresses is not None else [address_of(a) for a in allocations]
        self.seed = seed
        self._evaluator = evaluator

    def bytes(self, where: BufferSlice) -> np.ndarray:
        return self.allocations[where.allocation_index][where.offset:where.offset + where.size]

    def address(self, where: BufferSlice) -> int:
        return self.addresses[where.allocation_index] + where.offset

    def copy(self, source: BufferSlice, destination: BufferSlice) -> None:
        np.copyto(self.bytes(destination), self.bytes(source))

    def read(self, ref: BufferRef) -> Any:
        return ref.logical_view(self.bytes(ref.slice))

    def write(self, ref: BufferRef, value: Any) -> None:
        if ref.shape.is_array:
            np.copyto(self.read(ref), np.asarray(value), casting="unsafe")

    def launch(self, kernel: Kernel, addresses: list[int]) -> None:
        kernel.run_addresses(addresses)

    def gemm(self, output: BufferRef, lhs: BufferRef, rhs: BufferRef, dims: tuple[tuple[int, ...], ...]) -> None:
        library.gemm_buffers(self.allocations, output, lhs, rhs, dims)

    def convolution(self, thunk: ConvolutionThunk) -> None:
        library.convolution(self.read(thunk.output), self.read(thunk.lhs), self.read(thunk.rhs), thunk.window,
                            thunk.dnums, thunk.feature_groups, thunk.batch_groups)


def to_physical(array: np.ndarray, shape: Shape) -> np.ndarray:
    """Logical `array` as a C-contiguous array in `shape`'s physical (major-to-minor) order (no
    copy when it already is)."""
    order = list(reversed(shape.minor_to_major))
    if order != sorted(order):
        array = np.transpose(array, order)
    return np.ascontiguousarray(array)


def from_physical(array: np.ndarray, shape: Shape) -> np.ndarray:
    """An array in `shape`'s physical order as a view in logical order (strided for a non-default
    layout)."""
    order = list(reversed(shape.minor_to_major))
    return array if order == sorted(order) else np.transpose(array, np.argsort(order))


def logical_array(data: np.ndarray, shape: Shape) -> np.ndarray:
    """The array of `shape` whose bytes (in physical order) are `data`, as a view in logical order."""
    return from_physical(data.view(shape.dtype).reshape(shape.physical_dims), shape)


def physical_bytes(array: np.ndarray, shape: Shape) -> np.ndarray:
    """The bytes of logical `array` in `shape`'s physical order (no copy when already in that order)."""
    return to_physical(array, shape).reshape(-1).view(np.uint8)


@dataclass(frozen=True)
class BufferRef:
    """The array of `shape` (an array or token leaf, with its layout) stored at `slice`."""

    slice: BufferSlice
    shape: Shape

    def logical_view(self, data: np.ndarray) -> Any:
        """The array whose bytes are `data` (the slice's), in logical order; TOKEN for a token."""
        if not self.shape.is_array:
            return TOKEN
        return logical_array(data, self.shape)

    def __str__(self) -> str:
        return f"{self.shape}@{self.slice}"


@dataclass(frozen=True)
class ValueRefs:
    """Where a (possibly tuple-shaped) value lives: a BufferRef per leaf, nested like the shape."""

    shape: Shape
    leaves: tuple[BufferRef, ...]

    def read(self, memory: Memory) -> Any:
        return nest(self.shape, iter([memory.read(ref) for ref in self.leaves]))

    def write(self, memory: Memory, value: Any) -> None:
        for ref, v in zip(self.leaves, flatten(self.shape, value)):
            if ref.shape.is_array:
                memory.write(ref, v)


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
    """What a backend compiles a fusion into (backends/cpu/kernel.py CompiledKernel, a device's
    kernel in backends/cuda). `run_addresses` runs it on the host's memory; a device memory
    launches it its own way (`Memory.launch`)."""

    name: str
    emitter: str
    output_aliases: tuple[tuple[int, int], ...]

    def run_addresses(self, addresses: list[int]) -> None: ...


class KernelLauncher(Protocol):
    """A launch of one kernel prepared once (runtime/call_plan.py): `table` holds one address per
    buffer, which the caller fills (the fixed ones once, the others before each `run`). A kernel
    offers one with `launcher(count)` (`count` buffers) where it can; one launcher serves one
    thread at a time."""

    table: Any

    def run(self) -> None: ...


@dataclass(frozen=True)
class LaunchSource:
    """A kernel with runtime dims launched by lines of a generated call (runtime/call_plan.py),
    not by an object made per size: Python source, over the dimension variables, of its launch
    facts, which a binding evaluates once; and what the lines call. A kernel offers one with
    `launch_source(names)` (`names[v]`: the source reading variable v) where it can.

    `mode`: 0 no work (every output empty), 1 the blocks run in the calling thread,
    `fn(table address, 0, blocks)`, 2 over the thread pool, `pool(fn, table, blocks, elements)`;
    the kernel reads the values of `symbols`, as i64, through the table's slot after its buffers;
    `scope`: the names the sources call."""

    symbols: tuple[str, ...]
    mode: str
    blocks: str
    elements: str
    fn: Any
    pool: Callable[..., None]
    scope: dict[str, Any]


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
        memory.launch(self.kernel, [memory.address(r.slice) for r in self.arguments])

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
        memory.gemm(self.output, self.lhs, self.rhs, self.dims)

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
        memory.convolution(self)

    def describe(self) -> list[str]:
        return [f"convolution {self.instr_name}: {_args([self.lhs, self.rhs])} -> {self.output}"]


@dataclass
class LibraryThunk:
    """A library call computed on the host from the operand buffers (views on the host, copies
    from a device) into the output buffers: `compute(values, evaluator)` returns the output
    arrays (runtime/library.py: sort, top-k). Unlike a HostThunk it runs one numpy routine, not
    the evaluator's op-by-op interpretation."""

    instr_name: str
    call: str
    compute: Callable[[list, Evaluator], list]
    operands: list[BufferRef]
    outputs: list[BufferRef]
    kind: str = "library"

    def execute(self, memory: Memory) -> None:
        values = [memory.read(ref) for ref in self.operands]
        for ref, value in zip(self.outputs, self.compute(values, memory.evaluator)):
            memory.write(ref, value)

    def describe(self) -> list[str]:
        return [f"{self.call} {self.instr_name}: {_args(self.operands)} -> {_args(self.outputs)}"]


@dataclass
class CopyThunk:
    source: BufferSlice
    destination: BufferSlice
    why: str
    kind: str = "copy"

    def execute(self, memory: Memory) -> None:
        memory.copy(self.source, self.destination)

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
    native: Any = field(default=False, compare=False, repr=False)  # its NativeControl or None (runtime/native_loop.py)

    def execute(self, memory: Memory) -> None:
        self.loop(memory, self.condition.execute, self.body.execute, lambda m: m.read(self.predicate).item())

    def loop(self, memory: Memory, condition: Callable[[Memory], None], body: Callable[[Memory], None],
             predicate: Callable[[Memory], Any]) -> None:
        """The loop, with `condition` and `body` running the nested sequences and `predicate`
        reading the condition's result (runtime/call_plan.py passes their planned forms)."""
        while True:
            condition(memory)
            if not predicate(memory):  # one byte to the host per iteration
                return
            body(memory)

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
    native: Any = field(default=False, compare=False, repr=False)  # its NativeControl or None (runtime/native_loop.py)

    def execute(self, memory: Memory) -> None:
        self.branches[self.branch(memory)].execute(memory)

    def branch(self, memory: Memory) -> int:
        """The index of the branch the selector picks."""
        value = memory.read(self.selector).item()
        if self.selector.shape.element_type.is_pred:
            return 0 if value else 1
        return value if 0 <= value < len(self.branches) else len(self.branches) - 1

    def children(self) -> tuple[SequentialThunk, ...]:
        return tuple(self.branches)

    def describe(self) -> list[str]:
        lines = [f"conditional {self.instr_name} on {self.selector}:"]
        for k, branch in enumerate(self.branches):
            lines += [f"  branch {k}"] + _indent(_indent(branch.describe()))
        return lines


@dataclass
class ScalarThunk:
    """A get-dimension-size: the size `value` (a DimExpr until a dynamic program's binding makes it
    a number, runtime/dynamic_program.py) written into its s32 buffer, no evaluator."""

    name: str
    value: Any  # int, or a DimExpr of a symbolic dimension
    output: BufferRef
    kind: str = "host"

    def __post_init__(self) -> None:  # a number's bytes made once (a binding's thunk runs every call)
        self._array = np.array(self.value, self.output.shape.dtype) if isinstance(self.value, int) else None

    def execute(self, memory: Memory) -> None:
        value = self._array if self._array is not None else np.array(self.value, self.output.shape.dtype)
        if type(memory) is HostMemory:
            ctypes.memmove(memory.address(self.output.slice), value.ctypes.data, value.nbytes)
        else:
            memory.write(self.output, value)

    def describe(self) -> list[str]:
        return [f"host {self.name} (get-dimension-size: the size {self.value} written)"]


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
    "ALIGNMENT", "BufferRef", "ConditionalThunk", "ConvolutionThunk", "CopyThunk", "GemmThunk", "HostMemory",
    "HostThunk", "KernelLauncher", "KernelThunk", "LaunchSource", "LibraryThunk", "Memory", "ScalarThunk",
    "SequentialThunk", "Thunk", "ValueRefs", "WhileThunk", "address_of", "aligned_bytes", "from_physical",
    "logical_array", "physical_bytes", "to_physical",
]
