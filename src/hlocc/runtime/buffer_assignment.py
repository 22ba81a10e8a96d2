"""Buffer assignment: where every array of a scheduled module lives at run time (XLA's
BufferAssignment, buffer_assignment.h).

    assignment = assign_buffers(module)                 # schedules the module if not given a schedule
    assignment.slice_for(instr, shape_index)            # BufferSlice(allocation_index, offset, size)
    assignment.output_slices                            # one slice per leaf of the entry result
    assignment.copies_before(while_instr)               # copies the runtime makes at boundaries
    print(assignment.to_string())                       # XLA-style dump, with the peak memory

Allocations, as in XLA: each leaf of an entry parameter is an allocation of its own (caller-owned,
never reused for temporaries); each constant too (read-only); each leaf of the entry result too
(handed to the caller; an output aliased by `input_output_alias` is its parameter's allocation).
Temporaries, those of every nested computation included, share one *temp arena* packed by the
heap simulator over the flattened timeline (`temp_layout="arena"`, the default, as XLA:GPU does);
`temp_layout="allocations"` instead gives each temporary an allocation, reusing dead ones.
A module with symbolic dimensions (hlo/symbolic.py) takes `temp_layout="slots"`: the same reuse
decided once on the symbolic sizes (heap_simulator.py `reuse_slots`), every size, offset and the
peak a symbolic size evaluated per call (runtime/dynamic_program.py), a slot whose blocks' sizes
no order fits for every binding sized by a `slot<k>` variable, the largest of `size_maxima[k]`.
Instructions of fused and other embedded computations get no buffers: only the fusion's outputs do.

The pieces: dataflow.py (values), buffer_sharing.py (in-place and reuse rules), schedule.py,
liveness.py (the timeline), alias_analysis.py (buffers and boundary copies), heap_simulator.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from hlocc.errors import HloError
from hlocc.hlo.call_graph import build_call_graph
from hlocc.hlo.ir import HloInstruction, HloModule
from hlocc.hlo.symbolic import DimExpr
from hlocc.runtime.alias_analysis import AliasAnalysis, HloBuffer
from hlocc.runtime.buffer_sharing import BufferSharing
from hlocc.runtime.dataflow import HloDataflow, HloValue, ShapeIndex, format_index, leaf_indices
from hlocc.runtime.heap_simulator import (
    HEAP_ALGORITHMS,
    HeapBlock,
    live_bytes_lower_bound,
    pack,
    reuse_allocations,
    reuse_slots,
)
from hlocc.runtime.liveness import Liveness, Timeline
from hlocc.runtime.schedule import HloSchedule, schedule_module

TEMP_LAYOUTS = ("arena", "allocations", "slots")


class AllocationKind(StrEnum):
    PARAMETER = "parameter"
    CONSTANT = "constant"
    OUTPUT = "output"
    TEMP = "temp"    # one temporary buffer at a time (temp_layout="allocations")
    ARENA = "arena"  # all temporaries, at offsets (temp_layout="arena")


@dataclass(frozen=True)
class BufferSlice:
    """`size` bytes at `offset` in allocation `allocation_index` (XLA's BufferAllocation::Slice)."""

    allocation_index: int
    offset: int
    size: int

    def overlaps(self, other: BufferSlice) -> bool:
        """Whether the two slices share a byte (empty slices share none). Slices of one allocation
        with a symbolic offset or size may, at some size: they overlap (never decided at a hint)."""
        if self.allocation_index == other.allocation_index and any(
                isinstance(v, DimExpr) for v in (self.offset, self.size, other.offset, other.size)):
            return True
        return (self.allocation_index == other.allocation_index and self.size > 0 and other.size > 0
                and self.offset < other.offset + other.size and other.offset < self.offset + self.size)

    def __str__(self) -> str:
        return f"{{allocation {self.allocation_index}, offset {self.offset}, size {self.size}}}"


@dataclass(frozen=True)
class BufferCopy:
    """A copy the runtime makes at a boundary (alias_analysis.py); `size` bytes."""

    source: BufferSlice
    destination: BufferSlice

    def __str__(self) -> str:
        return f"{self.source} -> {self.destination}"


@dataclass
class BufferAllocation:
    """A contiguous block of memory the runtime allocates (or the caller passes in)."""

    index: int
    size: int
    kind: AllocationKind
    parameter_number: int | None = None
    parameter_index: ShapeIndex = ()
    output_indices: list[ShapeIndex] = field(default_factory=list)
    buffers: list[tuple[HloBuffer, int]] = field(default_factory=list, repr=False)  # (buffer, offset)

    @property
    def is_live_out(self) -> bool:
        return bool(self.output_indices)

    @property
    def is_read_only(self) -> bool:
        return self.kind is AllocationKind.CONSTANT

    def describe(self) -> str:
        text = f"allocation {self.index}: size {self.size}, "
        if self.kind is AllocationKind.PARAMETER:
            text += f"parameter {self.parameter_number} at {format_index(self.parameter_index)}"
        elif self.kind is AllocationKind.ARENA:
            text += "temp arena"
        elif self.kind is not AllocationKind.OUTPUT:
            text += self.kind.value
        if self.output_indices:
            text += (", " if self.kind is not AllocationKind.OUTPUT else "") + "output "
            text += " ".join(map(format_index, self.output_indices))
        return text


class BufferAssignment:
    """The result of `assign_buffers`; see the module docstring."""

    def __init__(self, module: HloModule, schedule: HloSchedule, dataflow: HloDataflow, liveness: Liveness,
                 aliases: AliasAnalysis, allocations: list[BufferAllocation], placement: dict[int, BufferSlice],
                 heap_algorithm: str, alignment: int, temp_lower_bound_bytes: int,
                 size_maxima: dict | None = None):
        self.module = module
        self.schedule = schedule
        self.dataflow = dataflow
        self.allocations = allocations
        self.heap_algorithm = heap_algorithm
        self.alignment = alignment
        self._liveness = liveness
        self._aliases = aliases
        self._placement = placement  # buffer id -> slice of the whole buffer
        entry = module.entry
        self.output_indices: tuple[ShapeIndex, ...] = leaf_indices(entry.root.shape)
        by_output = {index: buffer for buffer in aliases.buffers for index in buffer.output_indices}
        self.output_slices: tuple[BufferSlice, ...] = tuple(
            self._slice(by_output[i], self.dataflow.value_at(entry.root, i).size) for i in self.output_indices)
        self.temp_bytes = sum(a.size for a in allocations if a.kind in (AllocationKind.TEMP, AllocationKind.ARENA))
        self.output_bytes = sum(a.size for a in allocations if a.kind is AllocationKind.OUTPUT)
        self.peak_bytes = self.temp_bytes + self.output_bytes
        """Memory one run allocates: the temporaries (arena) and the outputs; parameters are the
        caller's and constants live as long as the executable."""
        self.temp_lower_bound_bytes = temp_lower_bound_bytes
        """The most bytes of temporaries live at one tick: what a perfect packing would need."""
        self.size_maxima: dict[str, tuple] = size_maxima or {}
        """temp_layout "slots": the value of each `slot<k>` size variable is the largest of these sizes."""

    # -- slices --------------------------------------------------------------------------------
    def _slice(self, buffer: HloBuffer, size: int) -> BufferSlice:
        whole = self._placement[buffer.id]
        return BufferSlice(whole.allocation_index, whole.offset, size)

    def slice_of_value(self, value: HloValue) -> BufferSlice:
        return self._slice(self._aliases.buffer_of(value), value.size)

    def slice_for(self, instr: HloInstruction, shape_index: ShapeIndex = ()) -> BufferSlice:
        """Where the array at leaf `shape_index` of `instr` lives. Raises HloError for an instruction
        of a fused computation and for a tuple index (tuples have no storage of their own)."""
        return self.slice_of_value(self.dataflow.value_at(instr, tuple(shape_index)))

    def leaf_slices(self, instr: HloInstruction) -> list[tuple[ShapeIndex, BufferSlice]]:
        return [(index, self.slice_for(instr, index)) for index in leaf_indices(instr.shape)]

    def has_slice(self, instr: HloInstruction, shape_index: ShapeIndex = ()) -> bool:
        try:
            self.dataflow.value_at(instr, tuple(shape_index))
        except HloError:
            return False
        return True

    def parameter_allocation(self, param_number: int, shape_index: ShapeIndex = ()) -> BufferAllocation:
        for allocation in self.allocations:
            if (allocation.kind is AllocationKind.PARAMETER and allocation.parameter_number == param_number
                    and allocation.parameter_index == tuple(shape_index)):
                return allocation
        raise HloError(f"entry parameter {param_number} has no array at {format_index(tuple(shape_index))}")

    def buffer_of(self, value: HloValue) -> HloBuffer:
        return self._aliases.buffer_of(value)

    def same_buffer(self, a: HloInstruction, b: HloInstruction, a_index: ShapeIndex = (),
                    b_index: ShapeIndex = ()) -> bool:
        """Whether two positions hold values of one buffer (e.g. a dynamic-update-slice done in place)."""
        at = self.dataflow.value_at
        return self._aliases.buffer_of(at(a, tuple(a_index))) is self._aliases.buffer_of(at(b, tuple(b_index)))

    @staticmethod
    def slices_alias(a: BufferSlice, b: BufferSlice) -> bool:
        return a.overlaps(b)

    def live_range(self, value: HloValue) -> tuple[int, int]:
        """The closed range of timeline ticks (liveness.py) in which `value` is live."""
        return self._liveness.interval(value)

    @property
    def values(self) -> list[HloValue]:
        """Every logical buffer of the sequential computations, in program order."""
        return self.dataflow.values

    @property
    def buffers(self) -> list[HloBuffer]:
        return self._aliases.buffers

    def buffer_slice(self, buffer: HloBuffer) -> BufferSlice:
        return self._placement[buffer.id]

    # -- copies --------------------------------------------------------------------------------
    def _copies(self, key) -> list[BufferCopy]:
        return [BufferCopy(self._slice(src, size), self._slice(dst, size))
                for src, dst, size in self._aliases.copies.get(key, ())]

    def copies_before(self, instr: HloInstruction) -> list[BufferCopy]:
        """Copies to make, in order, before `instr` runs: a while's init into its state; an operand
        into an in-place output that could not share its buffer; a call's operands into the
        parameters of a callee with several call sites."""
        return self._copies(("before", instr))

    def copies_after(self, instr: HloInstruction, region: int = 0) -> list[BufferCopy]:
        """Copies after a region of `instr`: after each iteration of a while's body (its root into
        the state), after branch `region` of a conditional (its root into the result), after the
        callee of a call with several call sites (its root into the call's result)."""
        return self._copies(("after", instr, region))

    @property
    def exit_copies(self) -> list[BufferCopy]:
        """Copies at the end of the entry into output storage (see alias_analysis.py)."""
        return self._copies(("exit",))

    # -- checks and text -----------------------------------------------------------------------
    def verify(self) -> None:
        """Check the invariants: no two buffers live at the same tick share a byte, and the values of
        one buffer are live one after the other. Raises HloError naming the culprits."""
        for allocation in self.allocations:
            blocks = sorted(((*b.live_range, off, off + b.size, b) for b, off in allocation.buffers if b.size),
                            key=lambda t: t[0])
            active: list[tuple] = []
            for start, end, lo, hi, buffer in blocks:
                active = [a for a in active if a[1] >= start]
                for _, _, lo2, hi2, other in active:
                    if lo < hi2 and lo2 < hi:
                        raise HloError(f"buffers {other.id} and {buffer.id} are live together and overlap "
                                       f"in allocation {allocation.index}")
                active.append((start, end, lo, hi, buffer))
        for buffer in self.buffers:
            for (_, e1, v1), (s2, _, v2) in zip(buffer.intervals, buffer.intervals[1:]):
                if s2 < e1 or (s2 == e1 and not self._aliases.can_follow(v1, v2)):
                    raise HloError(f"values {v1} and {v2} of buffer {buffer.id} are live together")

    def _copy_point(self, key) -> str:
        if key[0] == "exit":
            return "at exit"
        if key[0] == "before":
            return f"before {key[1].name}"
        instr, region = key[1], key[2]
        if instr.opcode == "while":
            return f"after each iteration of {instr.name}"
        if instr.opcode == "conditional":
            return f"after branch {region} of {instr.name}"
        return f"after {instr.name}"

    def to_string(self) -> str:
        entry_algorithm = self.schedule.algorithms.get(self.module.entry, "given")
        lines = [f"BufferAssignment for module '{self.module.name}' (schedule: {entry_algorithm}; "
                 f"heap: {self.heap_algorithm}; alignment {self.alignment})"]
        for allocation in self.allocations:
            lines.append(allocation.describe() + ":")
            entries = []  # (offset, first live tick, id, text): by address, then in time
            for buffer, offset in allocation.buffers:
                if buffer.label:
                    start, end = buffer.live_range
                    entries.append((offset, start, -1, f" <{buffer.label}> (size={buffer.size},offset={offset}): "
                                                       f"live [{start}, {end}]"))
                for value in buffer.values:
                    s, e = self._liveness.interval(value)
                    entries.append((offset, s, value.id, f" value: <{value.id} {value.name}> (size={value.size},"
                                                          f"offset={offset}): {value.shape} live [{s}, {e}]"))
            lines.extend(text for *_, text in sorted(entries))
        copies = [(self._copy_point(key), key) for key in self._aliases.copies]
        if copies:
            lines.append("copies:")
            for point, key in copies:
                lines.extend(f" {point}: {copy}" for copy in self._copies(key))
        by_kind = {kind: sum(a.size for a in self.allocations if a.kind is kind) for kind in AllocationKind}
        lines.append(f"total bytes: parameters {by_kind[AllocationKind.PARAMETER]}, constants "
                     f"{by_kind[AllocationKind.CONSTANT]}, outputs {self.output_bytes}, temporaries {self.temp_bytes}")
        lines.append(f"peak memory: {self.peak_bytes} bytes (temporaries {self.temp_bytes} + outputs "
                     f"{self.output_bytes}); live temporaries need at least {self.temp_lower_bound_bytes}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_string()


def assign_buffers(module: HloModule, schedule: HloSchedule | None = None, *, temp_layout: str = "arena",
                   heap_algorithm: str = "auto", reuse_operand_buffers: bool = True,
                   alignment: int = 64) -> BufferAssignment:
    """Assign every array of `module` a slice of an allocation.

    schedule: the order of each sequential computation (default: `schedule_module(module)`).
    temp_layout: "arena" (one allocation, offsets by the heap simulator), "allocations", or "slots"
      (symbolic sizes: the module doc; decisions that need a number are made under the caller's
      `size_hint`).
    heap_algorithm: "auto", "best-fit" or "decreasing-size" (heap_simulator.py), for the arena.
    reuse_operand_buffers: let elementwise ops and fusions write over a dying operand (in-place
      updates share their operand's buffer whatever this says, when it is safe).
    alignment: of every offset in the arena, in bytes.
    """
    if temp_layout not in TEMP_LAYOUTS:
        raise HloError(f"unknown temp layout '{temp_layout}' (known: {', '.join(TEMP_LAYOUTS)})")
    if heap_algorithm not in HEAP_ALGORITHMS:
        raise HloError(f"unknown heap algorithm '{heap_algorithm}' (known: {', '.join(HEAP_ALGORITHMS)})")
    if alignment < 1:
        raise HloError(f"alignment must be a positive number of bytes, not {alignment}")
    graph = build_call_graph(module)
    dataflow = HloDataflow(module, graph)
    if schedule is None:
        schedule = schedule_module(module, dataflow=dataflow)
    else:
        schedule.verify()
    timeline = Timeline(graph, schedule)
    liveness = Liveness(dataflow, timeline)
    aliases = AliasAnalysis(module, dataflow, timeline, liveness, BufferSharing(reuse_operand_buffers))
    temps = [b for b in aliases.buffers if b.kind == "temp"]
    blocks = [HeapBlock(b.id, *b.live_range, b.size) for b in temps]
    if temp_layout == "slots":
        slots = reuse_slots(blocks)
        allocations, placement = _own_allocations(module, aliases)
        _temp_allocations(allocations, placement, slots.sizes, slots.owner, {b.id: b for b in aliases.buffers})
        return BufferAssignment(module, schedule, dataflow, liveness, aliases, allocations, placement,
                                "slots", alignment, 0, slots.maxima)
    allocations, placement, algorithm = _allocate(module, aliases, blocks, temp_layout, heap_algorithm, alignment)
    return BufferAssignment(module, schedule, dataflow, liveness, aliases, allocations, placement,
                            algorithm, alignment, live_bytes_lower_bound(blocks, alignment))


def _temp_allocations(allocations: list[BufferAllocation], placement: dict[int, BufferSlice], sizes: list,
                      owner: dict[int, int], by_id: dict[int, HloBuffer]) -> None:
    """An allocation per temp size of `sizes`, holding the buffers `owner` puts in it."""
    first = len(allocations)
    allocations += [BufferAllocation(first + i, size, AllocationKind.TEMP) for i, size in enumerate(sizes)]
    for key, i in owner.items():
        allocations[first + i].buffers.append((by_id[key], 0))
        placement[key] = BufferSlice(first + i, 0, by_id[key].size)


def _allocate(module: HloModule, aliases: AliasAnalysis, blocks: list[HeapBlock], temp_layout: str,
              heap_algorithm: str, alignment: int) -> tuple[list[BufferAllocation], dict[int, BufferSlice], str]:
    allocations, placement = _own_allocations(module, aliases)
    by_id = {b.id: b for b in aliases.buffers}
    if not blocks:
        return allocations, placement, "none"
    if temp_layout == "arena":
        layout = pack(blocks, alignment, heap_algorithm)
        arena = BufferAllocation(len(allocations), layout.size, AllocationKind.ARENA)
        allocations.append(arena)
        for key, offset in layout.offsets.items():
            arena.buffers.append((by_id[key], offset))
            placement[key] = BufferSlice(arena.index, offset, by_id[key].size)
        return allocations, placement, layout.algorithm
    sizes, owner = reuse_allocations(blocks)
    _temp_allocations(allocations, placement, sizes, owner, by_id)
    return allocations, placement, "reuse"


def _own_allocations(module: HloModule, aliases: AliasAnalysis) -> tuple[list[BufferAllocation],
                                                                        dict[int, BufferSlice]]:
    """An allocation of its own for each parameter, constant and output buffer (the module doc)."""
    allocations: list[BufferAllocation] = []
    placement: dict[int, BufferSlice] = {}

    def own(buffer: HloBuffer, kind: AllocationKind, **kwargs) -> None:
        allocation = BufferAllocation(len(allocations), buffer.size, kind, output_indices=list(buffer.output_indices),
                                      buffers=[(buffer, 0)], **kwargs)
        allocations.append(allocation)
        placement[buffer.id] = BufferSlice(allocation.index, 0, buffer.size)

    def first_value(buffer: HloBuffer, pinned: str) -> HloValue:
        return next(v for v in buffer.values if (v.is_entry_parameter if pinned == "parameter" else v.is_constant))

    params = [(first_value(b, "parameter"), b) for b in aliases.buffers if b.pinned == "parameter"]
    for value, buffer in sorted(params, key=lambda t: (t[0].instruction.parameter_number, t[0].index)):
        own(buffer, AllocationKind.PARAMETER, parameter_number=value.instruction.parameter_number,
            parameter_index=value.index)
    constants = [(first_value(b, "constant"), b) for b in aliases.buffers if b.pinned == "constant"]
    for _, buffer in sorted(constants, key=lambda t: t[0].id):
        own(buffer, AllocationKind.CONSTANT)
    order = {index: i for i, index in enumerate(leaf_indices(module.entry.root.shape))}
    outputs = [b for b in aliases.buffers if b.kind == "output"]
    for buffer in sorted(outputs, key=lambda b: order[b.output_indices[0]]):
        own(buffer, AllocationKind.OUTPUT)
    return allocations, placement


