"""The per-call host path of a compiled program, planned once (issue 18 item 4: what BladeDISC's
compiled host flow, RAL, is for). A `CallPlan` is made from a program's allocations (their sizes
known: a static program's, or a dynamic program's at one binding), its thunks and its outputs; a
call then does only what depends on the arguments:

    take an arena from the pool (or make one)   temporaries and prepared kernel launches, reused
    the parameters' addresses                   the caller's arrays, in place (or copied, when written)
    one fresh buffer for all outputs            what the caller gets back is never reused
    patch the kernels' parameter and output slots, run the planned steps
    the outputs' views (their dtype, dims and transpose precomputed), the arena back to the pool

Planned once, in the arena: each temporary buffer and its address, and for every kernel a
`KernelLauncher` (runtime/thunks.py; backends/cpu/kernel.py CompiledKernel.launcher) whose table
of addresses holds the temporaries' and constants' slots already. Nested while and conditional
sequences are planned the same way (their loop and branch choice stay the thunks'). A thunk with no
planned form (a copy, a library call, a host fallback, a kernel without `launcher`) runs its own
`execute` on the call's HostMemory; the evaluator is made only if one of them asks for it.

Thread safety: an arena serves one call at a time (popped from the pool, pushed back after: both
atomic list operations), so concurrent calls each have their own temporaries and tables.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hlocc.evaluator.core import TOKEN
from hlocc.hlo.ir import HloModule
from hlocc.hlo.types import Shape
from hlocc.runtime.buffer_assignment import AllocationKind, BufferAllocation
from hlocc.runtime.thunks import (
    ALIGNMENT,
    BufferRef,
    ConditionalThunk,
    HostMemory,
    KernelThunk,
    SequentialThunk,
    Thunk,
    WhileThunk,
    address_of,
    aligned_bytes,
    nest,
)

Step = Callable[[HostMemory], None]
MAX_ARENAS = 8
"""Arenas a plan keeps for reuse (one per thread calling at once; more are made and dropped)."""


@dataclass(frozen=True)
class _Parameter:
    allocation: int
    number: int
    in_place: bool  # a whole array argument in its default layout, not written: its own bytes
    copy: bool  # the program writes it: a fresh copy per call
    source: BufferAllocation


@dataclass(frozen=True)
class _Leaf:
    """An output leaf's view: bytes [offset, offset + size) of its allocation as `dims` of `dtype`
    (physical order), transposed by `axes` into logical order where the layout is not the default."""

    allocation: int
    offset: int
    size: int
    dtype: Any
    dims: tuple[int, ...] | None  # None: a token
    axes: tuple[int, ...] | None

    def read(self, allocations: list[np.ndarray]) -> Any:
        if self.dims is None:
            return TOKEN
        array = allocations[self.allocation][self.offset:self.offset + self.size].view(self.dtype).reshape(self.dims)
        return array if self.axes is None else array.transpose(self.axes)


class _Arena:
    """One caller's reusable state: allocations and addresses with the constants and temporaries
    filled in, and the planned steps bound to this arena's kernel launches."""

    __slots__ = ("allocations", "addresses", "steps")

    def __init__(self, allocations: list, addresses: list[int]):
        self.allocations = allocations
        self.addresses = addresses
        self.steps: list[Step] = []


def _leaf(ref: BufferRef) -> _Leaf:
    if not ref.shape.is_array:
        return _Leaf(ref.slice.allocation_index, 0, 0, None, None, None)
    return _Leaf(ref.slice.allocation_index, ref.slice.offset, ref.slice.size, ref.shape.dtype,
                 tuple(ref.shape.physical_dims), _physical_axes(ref.shape))


def _physical_axes(shape: Shape) -> tuple[int, ...] | None:
    order = list(reversed(shape.minor_to_major))
    return None if order == sorted(order) else tuple(int(a) for a in np.argsort(order))


class CallPlan:
    """The per-call path of one program at known allocation sizes (module doc).

    `allocations`: the buffer assignment's; `sizes`: their sizes; `program`: the thunks (sizes
    bound); `outputs`: the entry result's leaves; `parameter_bytes(args, allocation, copy)` the
    bytes of a parameter the fast path does not take in place."""

    def __init__(self, module: HloModule, allocations: Sequence[BufferAllocation], sizes: Sequence[int],
                 program: SequentialThunk, outputs: Sequence[BufferRef], constants: dict[int, np.ndarray],
                 copied: frozenset[int], parameter_bytes: Callable[..., np.ndarray], seed: int = 0):
        self.module = module
        self.result_shape = module.entry.root.shape
        self.program = program
        self.seed = seed
        self.sizes = list(sizes)
        self.constants = constants
        self.parameter_bytes = parameter_bytes
        output_allocations = {r.slice.allocation_index for r in outputs}
        self.parameters: list[_Parameter] = []
        self.fresh: list[tuple[int, int, int]] = []  # (allocation, offset in the outputs' buffer, size)
        self.temps: list[tuple[int, int]] = []  # (allocation, size)
        self.fresh_size = 0
        for a in allocations:
            size = self.sizes[a.index]
            if a.kind is AllocationKind.PARAMETER:
                shape = module.entry.parameter(a.parameter_number).shape
                in_place = (not a.parameter_index and shape.is_array and a.index not in copied
                            and _physical_axes(shape) is None)
                self.parameters.append(_Parameter(a.index, a.parameter_number, in_place, a.index in copied, a))
            elif a.kind is AllocationKind.CONSTANT:
                continue
            elif a.kind is AllocationKind.OUTPUT or a.index in output_allocations:
                self.fresh.append((a.index, self.fresh_size, size))
                self.fresh_size += -(-size // ALIGNMENT) * ALIGNMENT
            else:
                self.temps.append((a.index, size))
        self.variable = frozenset(p.allocation for p in self.parameters) | {f[0] for f in self.fresh}
        self.leaves = [_leaf(r) for r in outputs]
        self.launchers_built = 0  # kernel launches prepared, over all arenas (a test counts them)
        # the bytes of an in-place argument are needed only where a thunk reads the allocation itself
        self.bytes_needed = _reads_bytes(program) or bool({leaf.allocation for leaf in self.leaves}
                                                 & {p.allocation for p in self.parameters})
        self._arenas: list[_Arena] = []

    # -- per call --------------------------------------------------------------------------------
    def run(self, args: Sequence[Any]) -> Any:
        """Run on checked arguments (compiler.check_arguments' values); the entry's result."""
        try:
            arena = self._arenas.pop()
        except IndexError:
            arena = self._arena()
        try:
            allocations = arena.allocations.copy()
            addresses = arena.addresses.copy()
            for p in self.parameters:
                if p.in_place:
                    value = args[p.number]
                    allocations[p.allocation] = value.reshape(-1).view(np.uint8) if self.bytes_needed else value
                    addresses[p.allocation] = address_of(value)
                else:
                    data = self.parameter_bytes(args, p.source, p.copy)
                    allocations[p.allocation] = data
                    addresses[p.allocation] = address_of(data)
            if self.fresh:
                raw = np.empty(self.fresh_size + ALIGNMENT, np.uint8)
                base = address_of(raw)
                start = -base % ALIGNMENT
                buffer, base = raw[start:], base + start
                for index, offset, size in self.fresh:
                    allocations[index] = buffer[offset:offset + size]
                    addresses[index] = base + offset
            memory = HostMemory(allocations, None, addresses, self.seed)
            for step in arena.steps:
                step(memory)
            leaves = [leaf.read(allocations) for leaf in self.leaves]
        finally:
            if len(self._arenas) < MAX_ARENAS:
                self._arenas.append(arena)
        if len(leaves) == 1 and not self.result_shape.is_tuple:
            return leaves[0]
        return nest(self.result_shape, iter(leaves))

    # -- planned once per arena --------------------------------------------------------------------
    def _arena(self) -> _Arena:
        n = len(self.sizes)
        allocations: list = [None] * n
        addresses = [0] * n
        for index, data in self.constants.items():
            allocations[index], addresses[index] = data, address_of(data)
        for index, size in self.temps:
            data = aligned_bytes(size)
            allocations[index], addresses[index] = data, address_of(data)
        arena = _Arena(allocations, addresses)
        arena.steps = [self._step(t, arena) for t in self.program.thunks]
        return arena

    def _step(self, thunk: Thunk, arena: _Arena) -> Step:
        if isinstance(thunk, SequentialThunk):
            return _sequence([self._step(t, arena) for t in thunk.thunks])
        if isinstance(thunk, WhileThunk):
            condition = _sequence([self._step(t, arena) for t in thunk.condition.thunks])
            body = _sequence([self._step(t, arena) for t in thunk.body.thunks])
            predicate = _leaf(thunk.predicate)
            return lambda memory: thunk.loop(memory, condition, body,
                                             lambda m: predicate.read(m.allocations).item())
        if isinstance(thunk, ConditionalThunk):
            branches = [_sequence([self._step(t, arena) for t in b.thunks]) for b in thunk.branches]
            return lambda memory: branches[thunk.branch(memory)](memory)
        if isinstance(thunk, KernelThunk) and hasattr(thunk.kernel, "launcher"):
            return self._kernel_step(thunk, arena)
        return thunk.execute

    def _kernel_step(self, thunk: KernelThunk, arena: _Arena) -> Step:
        launch = thunk.kernel.launcher(len(thunk.arguments))
        self.launchers_built += 1
        table, run = launch.table, launch.run
        patches = []
        for slot, ref in enumerate(thunk.arguments):
            index, offset = ref.slice.allocation_index, ref.slice.offset
            if index in self.variable:
                patches.append((slot, index, offset))
            else:
                table[slot] = arena.addresses[index] + offset
        patches = tuple(patches)

        def step(memory: HostMemory) -> None:
            addresses = memory.addresses
            for slot, index, offset in patches:
                table[slot] = addresses[index] + offset
            run()
        step.launch = launch  # keeps the table alive with the step
        return step


def _sequence(steps: list[Step]) -> Step:
    if len(steps) == 1:
        return steps[0]

    def run(memory: HostMemory) -> None:
        for step in steps:
            step(memory)
    return run


def _reads_bytes(program: SequentialThunk) -> bool:
    """Whether a thunk reads allocations as bytes (HostMemory.bytes): all but planned kernels."""
    return any(not (isinstance(t, KernelThunk) and hasattr(t.kernel, "launcher"))
               for t in program.walk() if not isinstance(t, SequentialThunk))


__all__ = ["CallPlan", "MAX_ARENAS"]
