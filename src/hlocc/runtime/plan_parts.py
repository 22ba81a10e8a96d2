"""The parts of a call plan (runtime/call_plan.py) that stand on their own: a parameter's and an
output leaf's description, the small step builders, and the tests that sort a plan's thunks
(planned kernel, inline copy, a kernel every binding shares) — split from call_plan.py, whose
CallPlan, BoundCall and SharedCall use them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hlocc.evaluator.core import TOKEN
from hlocc.hlo.types import Shape
from hlocc.runtime.buffer_assignment import BufferAllocation
from hlocc.runtime.thunks import (
    ALIGNMENT,
    BufferRef,
    CopyThunk,
    HostMemory,
    KernelThunk,
    LaunchSource,
    SequentialThunk,
    Thunk,
)

Step = Callable[[HostMemory], None]


@dataclass(frozen=True)
class Parameter:
    allocation: int
    number: int
    in_place: bool  # a whole array argument in its default layout, not written: its own bytes
    copy: bool  # the program writes it: a fresh copy per call
    source: BufferAllocation


@dataclass(frozen=True)
class Leaf:
    """An output leaf's view: bytes [offset, offset + size) of its allocation as `dims` of `dtype`
    (physical order), transposed by `axes` into logical order where the layout is not the default."""

    allocation: int
    offset: int
    size: int
    dtype: Any
    dims: tuple | None  # None: a token (symbolic sizes in a symbolic plan)
    axes: tuple[int, ...] | None

    def read(self, allocations: list[np.ndarray]) -> Any:
        if self.dims is None:
            return TOKEN
        array = allocations[self.allocation][self.offset:self.offset + self.size].view(self.dtype).reshape(self.dims)
        return array if self.axes is None else array.transpose(self.axes)


@dataclass(frozen=True)
class Binding:
    """A symbolic plan at one binding (`CallPlan.at`): `values` of its `exprs`, `kernels[k]` the
    bound kernel of its k-th top-level thunk where that is symbolic, `steps[k]` the bound thunk
    where it has no planned form."""

    values: tuple[int, ...]
    kernels: dict[int, Any]
    steps: dict[int, Thunk]


@dataclass
class Arena:
    """One caller's reusable buffers: the allocations and addresses of the constants and
    temporaries (the others' are filled per call)."""

    allocations: list
    addresses: list[int]


def leaf_of(ref: BufferRef) -> Leaf:
    if not ref.shape.is_array:
        return Leaf(ref.slice.allocation_index, 0, 0, None, None, None)
    return Leaf(ref.slice.allocation_index, ref.slice.offset, ref.slice.size, ref.shape.dtype,
                 tuple(ref.shape.physical_dims), physical_axes(ref.shape))


def own_outputs(fresh: Sequence[tuple[int, Any, Any]], leaves: Sequence[Leaf]) -> tuple[dict[int, int], list, Any]:
    """Of a call plan's `fresh` allocations ((index, offset, size)), those whose whole is one output
    leaf (the only leaf there, at offset 0, of the allocation's size), as allocation -> leaf
    number: the call makes each an array of its own (call_plan.py `_source`); then the others, at
    their offsets in the outputs' shared buffer, and that buffer's size."""
    by_allocation: dict[int, list[int]] = {}
    for j, leaf in enumerate(leaves):
        by_allocation.setdefault(leaf.allocation, []).append(j)
    own, shared, size = {}, [], 0
    for index, _, bytes_ in fresh:
        js = by_allocation.get(index, [])
        if len(js) == 1 and leaves[js[0]].dims is not None and leaves[js[0]].offset == 0 \
                and leaves[js[0]].size == bytes_:
            own[index] = js[0]
        else:
            shared.append((index, size, bytes_))
            size += round_up(bytes_)
    return own, shared, size


def physical_axes(shape: Shape) -> tuple[int, ...] | None:
    order = list(reversed(shape.minor_to_major))
    return None if order == sorted(order) else tuple(int(a) for a in np.argsort(order))


@dataclass(frozen=True)
class Fact:
    """An entry of a symbolic plan's numbers given by source rather than a DimExpr (a launch fact)."""

    source: str


def launch_source_of(kernel: Any, local: Callable[[str], str]) -> LaunchSource | None:
    """A symbolic kernel's launch as lines of the call (LaunchSource), where it has one version
    and its compiled kernel offers one; each variable v read from the local `local(v)`."""
    compiled = getattr(kernel, "kernel", None)
    if getattr(kernel, "versions", True) or not hasattr(compiled, "launch_source"):
        return None
    return compiled.launch_source({name: local(name) for name in compiled.symbols})


def shared_kernel(thunk: Thunk) -> bool:
    """A symbolic kernel whose every version launches over any table (`launch_at`)."""
    kernel = thunk.kernel
    return all(hasattr(k, "launch_at") for k in (getattr(kernel, "kernel", None), *(k for _, k in kernel.versions)))


def round_up(size: Any) -> Any:
    """`size` rounded up to a multiple of ALIGNMENT (an int, or a symbolic size)."""
    return -(-size // ALIGNMENT) * ALIGNMENT


def top_level(program: SequentialThunk) -> list[Thunk]:
    """The program's thunks with nested sequences spliced in."""
    return [leaf for t in program.thunks
            for leaf in (top_level(t) if isinstance(t, SequentialThunk) else [t])]


def inline_copy(thunk: Thunk) -> bool:
    """A copy between slices of one size: a memmove of the addresses (the bytes' arrays unused)."""
    return isinstance(thunk, CopyThunk) and thunk.source.size == thunk.destination.size


def predicate_reader(ref: BufferRef) -> Callable[[HostMemory], Any]:
    """Reads a while loop's predicate: a pred's one byte directly, any other through its view."""
    if ref.shape.element_type.is_pred and ref.slice.size == 1:
        index, offset = ref.slice.allocation_index, ref.slice.offset
        return lambda m: m.allocations[index][offset]
    leaf = leaf_of(ref)
    return lambda m: leaf.read(m.allocations).item()


def planned_kernel(thunk: Thunk) -> bool:
    """A kernel with a prepared launch: its own, or (a symbolic kernel, `bind`) its versions'."""
    kernel = thunk.kernel if isinstance(thunk, KernelThunk) else None
    return hasattr(kernel, "launcher") or (hasattr(kernel, "bind") and all(
        hasattr(k, "launcher") for k in (getattr(kernel, "kernel", None), *(k for _, k in kernel.versions))))


def nested_source(shape: Shape, leaves) -> str:
    """The expression of the entry's result: a tuple literal per tuple shape (like thunks.nest)."""
    if not shape.is_tuple:
        return next(leaves)
    items = [nested_source(s, leaves) for s in shape.tuple_shapes]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def sequence_step(steps: list[Step]) -> Step:
    if len(steps) == 1:
        return steps[0]

    def run(memory: HostMemory) -> None:
        for step in steps:
            step(memory)
    return run


def reads_bytes(program: SequentialThunk) -> bool:
    """Whether a thunk reads allocations as bytes (HostMemory.bytes): all but planned kernels."""
    return any(not (planned_kernel(t) or inline_copy(t)) for t in program.walk()
               if not isinstance(t, SequentialThunk))


__all__ = ["Fact", "Leaf", "Parameter", "Step", "inline_copy", "launch_source_of", "leaf_of", "nested_source",
           "physical_axes", "planned_kernel", "predicate_reader", "reads_bytes", "round_up", "sequence_step",
           "shared_kernel", "top_level"]
