"""Which values share storage (HloBuffers), and the copies the runtime makes where they cannot.

A buffer is a set of values that live in the same bytes at different times. Its members' live
intervals (liveness.py) never overlap, except that one may end at the tick where the next one is
defined by an instruction allowed to write over it (buffer_sharing.py: an in-place update, or an
elementwise op reading its dying operand). Buffers are built as in XLA's HloAliasAnalysis, but
hlocc has no copy-insertion pass, so every aliasing XLA would force is here a *decision* that is
taken only when it is safe, with a copy at the boundary otherwise:

- must alias (by construction): a while's result, its condition parameter and its body parameter
  (the loop state), per leaf; they also reserve the state's memory over the whole loop;
- decided in tick order: an operand's buffer for an in-place or reusing output; a while's init into
  the state; a body root into the state; a branch root into the conditional's result; then, at
  the end, each `input_output_alias` output into its parameter's buffer.

Where a decision fails the runtime copies (`copies`): the init into the state before the loop, the
body root into the state after each iteration, the branch root into the result, operands into the
parameters of a computation called from several sites (and the root back out), an operand into an
in-place output, and at the end of the entry the outputs that must live in a parameter or that
would otherwise be a parameter, a constant or a repeated output. The copies of one boundary form a
parallel copy: they are ordered so no source is overwritten before it is read, and a cycle (a
loop swapping two state leaves) goes through a scratch buffer.
"""

from __future__ import annotations

import itertools
from bisect import bisect_right, insort
from collections import Counter, deque
from dataclasses import dataclass, field
from operator import itemgetter

from hlocc.errors import HloError
from hlocc.hlo.call_graph import sequential_callees
from hlocc.hlo.ir import HloInstruction, HloModule
from hlocc.runtime.buffer_sharing import BufferSharing, in_place_pairs
from hlocc.runtime.dataflow import HloDataflow, HloValue, ShapeIndex, format_index, leaf_indices
from hlocc.runtime.liveness import Liveness, Timeline

_start = itemgetter(0)


@dataclass(eq=False)
class HloBuffer:
    """Values stored in the same bytes. `label` names a buffer that holds no value of the program:
    the destination of an output copy or the scratch of a cyclic parallel copy."""

    id: int
    size: int
    values: list[HloValue] = field(default_factory=list)
    intervals: list[tuple[int, int, HloValue]] = field(default_factory=list, repr=False)  # by start
    reservations: list[tuple[int, int]] = field(default_factory=list, repr=False)
    pinned: str | None = None  # "parameter" or "constant": storage the buffer assignment does not own
    multi_visit: bool = False
    output_indices: list[ShapeIndex] = field(default_factory=list)
    label: str = ""

    @property
    def kind(self) -> str:
        if self.pinned:
            return self.pinned
        return "output" if self.output_indices else "temp"

    @property
    def live_range(self) -> tuple[int, int]:
        """The hull of the members' intervals and the reserved ticks: when the bytes are taken."""
        starts = [s for s, _ in self.reservations]
        ends = [e for _, e in self.reservations]
        if self.intervals:
            starts.append(self.intervals[0][0])
            ends.append(max(e for _, e, _ in self.intervals))
        return min(starts), max(ends)


CopyKey = tuple  # ("before", instr) | ("after", instr, region) | ("exit",)
Copy = tuple[HloBuffer, HloBuffer, int]  # source, destination, bytes


class AliasAnalysis:
    """Builds the buffers of a module and the copies at boundaries (see the module docstring)."""

    def __init__(self, module: HloModule, dataflow: HloDataflow, timeline: Timeline, liveness: Liveness,
                 sharing: BufferSharing):
        self.module = module
        self.dataflow = dataflow
        self.timeline = timeline
        self.liveness = liveness
        self.sharing = sharing
        self._ids = itertools.count()
        self._of: dict[int, HloBuffer] = {}
        self._pseudo: list[HloBuffer] = []
        for value in dataflow.values:
            self._new_buffer(value)
        self._must_alias()
        for step in timeline.steps:
            self._decide(step)
        exit_copies = self._assign_outputs()
        self.copies: dict[CopyKey, list[Copy]] = self._plan_copies(exit_copies)
        live = {id(b): b for b in self._of.values()}
        self.buffers: list[HloBuffer] = sorted(list(live.values()) + self._pseudo, key=lambda b: b.id)

    # -- queries -------------------------------------------------------------------------------
    def buffer_of(self, value: HloValue) -> HloBuffer:
        return self._of[value.id]

    def buffer_at(self, instr: HloInstruction, index: ShapeIndex = ()) -> HloBuffer:
        return self._of[self.dataflow.value_at(instr, index).id]

    # -- buffers -------------------------------------------------------------------------------
    def _new_buffer(self, value: HloValue) -> HloBuffer:
        start, end = self.liveness.interval(value)
        pinned = "parameter" if value.is_entry_parameter else "constant" if value.is_constant else None
        buffer = HloBuffer(next(self._ids), value.size, [value], [(start, end, value)], pinned=pinned,
                           multi_visit=not self.timeline.is_single_visit(value.instruction))
        self._of[value.id] = buffer
        return buffer

    def _pseudo_buffer(self, size: int, ticks: list[int], label: str) -> HloBuffer:
        buffer = HloBuffer(next(self._ids), size, reservations=[(t, t) for t in ticks], label=label)
        self._pseudo.append(buffer)
        return buffer

    def _union(self, a: HloBuffer, b: HloBuffer) -> HloBuffer:
        small, large = (a, b) if len(a.intervals) <= len(b.intervals) else (b, a)
        for interval in small.intervals:
            insort(large.intervals, interval, key=_start)
        for value in small.values:
            self._of[value.id] = large
        large.values += small.values
        large.reservations += small.reservations
        large.output_indices += small.output_indices
        large.pinned = large.pinned or small.pinned
        large.multi_visit = large.multi_visit or small.multi_visit
        large.size = max(large.size, small.size)
        return large

    def _try_merge(self, a: HloBuffer, b: HloBuffer, allow_parameter: bool = False) -> bool:
        """Merge two buffers if no member of one is live while a member of the other is (a touch
        at an instruction that may overwrite its operand is allowed)."""
        if a is b:
            return True
        if a.multi_visit or b.multi_visit or a.size != b.size:
            return False
        pins = {a.pinned, b.pinned} - {None}
        if "constant" in pins or (pins and not allow_parameter) or (a.pinned and b.pinned):
            return False
        small, large = (a, b) if len(a.intervals) <= len(b.intervals) else (b, a)
        if any(self._conflicts(large, s, e, v) for s, e, v in small.intervals):
            return False
        self._union(a, b)
        return True

    def _conflicts(self, buffer: HloBuffer, s: int, e: int, value: HloValue) -> bool:
        """Whether [s, e] of `value` overlaps a member of `buffer`. Members are disjoint but for
        touches, so sorted by start their ends never decrease: scan back from the last member that
        starts by `e` while members still reach `s`."""
        intervals = buffer.intervals
        j = bisect_right(intervals, e, key=_start) - 1
        while j >= 0:
            s2, e2, other = intervals[j]
            if e2 < s:
                return False
            touch = (e2 == s and self.can_follow(other, value)) or (s2 == e and self.can_follow(value, other))
            if not touch:
                return True
            j -= 1
        return False

    def can_follow(self, dying: HloValue, defined: HloValue) -> bool:
        """`defined` starts at the tick where `dying` is last read; allowed if its instruction reads
        `dying` only at operand positions it may overwrite."""
        user = defined.instruction
        if user.opcode == "parameter" or sequential_callees(user) or not self.timeline.is_single_visit(user):
            return False
        if self.timeline.tick(user) != self.liveness.interval(dying)[1]:
            return False
        positions = [(k, index) for k, operand in enumerate(user.operands) for index in leaf_indices(operand.shape)
                     if self.dataflow.value_at(operand, index) is dying]
        return bool(positions) and all(self.sharing.can_share(user, defined.index, k, index)
                                       for k, index in positions)

    # -- decisions -----------------------------------------------------------------------------
    def _must_alias(self) -> None:
        at = self.dataflow.value_at
        for comp in self.dataflow.graph.computations:
            for instr in comp.instructions:
                if instr.opcode not in ("while", "conditional"):
                    continue
                callees = sequential_callees(instr)
                for index in leaf_indices(instr.shape):
                    buffer = self.buffer_of(at(instr, index))
                    if instr.opcode == "while":
                        for callee in callees:
                            buffer = self._union(buffer, self.buffer_of(at(callee.parameters[0], index)))
                    buffer.reservations += self.timeline.spans[instr]

    def _decide(self, step) -> None:
        at = self.dataflow.value_at
        instr = step.instr
        if step.kind == "instr":
            self._share_operands(instr, step.tick)
            return
        if step.kind == "while_enter":
            source = instr.operands[0]
        elif step.kind == "body_exit":
            source = instr.attrs["body"].root
        else:
            source = sequential_callees(instr)[step.region].root
        for index in leaf_indices(instr.shape):
            self._try_merge(self.buffer_of(at(source, index)), self.buffer_of(at(instr, index)))

    def _share_operands(self, instr: HloInstruction, tick: int) -> None:
        for value in self.dataflow.values_defined_by(instr):
            for k, index in self.sharing.candidates(instr, value.index):
                operand_value = self.dataflow.value_at(instr.operands[k], index)
                operand_buffer = self.buffer_of(operand_value)
                if (operand_buffer.pinned or self.liveness.interval(operand_value)[1] != tick
                        or not self.sharing.can_share(instr, value.index, k, index)):
                    continue
                if self._try_merge(operand_buffer, self.buffer_of(value)):
                    break

    def _assign_outputs(self) -> list[Copy]:
        """Give every leaf of the entry result a buffer of its own (see the module docstring)."""
        entry = self.module.entry
        at = self.dataflow.value_at
        leaves = leaf_indices(entry.root.shape)
        outputs: dict[ShapeIndex, HloBuffer] = {}
        copies: list[Copy] = []
        for out_index, number, param_index, kind in self.module.input_output_alias:
            if tuple(out_index) not in leaves or number >= entry.num_parameters:
                raise HloError(f"input_output_alias {format_index(out_index)}: ({number}, "
                               f"{format_index(param_index)}) names no array of the entry's result and parameters")
            out_index = tuple(out_index)
            param = self.buffer_of(at(entry.parameters[number], tuple(param_index)))
            value = at(entry.root, out_index)
            if self._try_merge(self.buffer_of(value), param, allow_parameter=True):
                outputs[out_index] = self.buffer_of(value)
            elif kind == "must-alias":
                copies.append((self.buffer_of(value), param, value.size))
                outputs[out_index] = param
            else:
                continue  # may-alias: the output gets storage of its own
            outputs[out_index].output_indices.append(out_index)
        claimed = {id(b) for b in outputs.values()}
        for out_index in leaves:
            if out_index in outputs:
                continue
            value = at(entry.root, out_index)
            buffer = self.buffer_of(value)
            if buffer.pinned or id(buffer) in claimed:
                exit_buffer = self._pseudo_buffer(value.size, [self.timeline.end],
                                                  f"output {format_index(out_index)}")
                copies.append((buffer, exit_buffer, value.size))
                buffer = exit_buffer
            claimed.add(id(buffer))
            buffer.output_indices.append(out_index)
        return copies

    # -- copies --------------------------------------------------------------------------------
    def _plan_copies(self, exit_copies: list[Copy]) -> dict[CopyKey, list[Copy]]:
        timeline, at, buf = self.timeline, self.dataflow.value_at, self.buffer_at
        boundaries: list[tuple[CopyKey, list[int], list[Copy]]] = []
        for comp in self.dataflow.graph.computations:
            for instr in comp.instructions:
                op = instr.opcode
                afters = []
                starts = [s for s, _ in timeline.spans[instr]]
                before = [(buf(instr.operands[p.operand_number], p.operand_index), buf(instr, p.output_index),
                           at(instr, p.output_index).size) for p in in_place_pairs(instr)]
                callees = sequential_callees(instr)
                leaves = leaf_indices(instr.shape)
                if op == "while":
                    body = callees[1]
                    before += [(buf(instr.operands[0], i), buf(instr, i), at(instr, i).size) for i in leaves]
                    after = [(buf(body.root, i), buf(instr, i), at(instr, i).size) for i in leaves]
                    afters.append((("after", instr, 0), [v.exit for v in timeline.visits[body]], after))
                elif op == "conditional":
                    for b, branch in enumerate(callees):
                        after = [(buf(branch.root, i), buf(instr, i), at(instr, i).size) for i in leaves]
                        afters.append((("after", instr, b), [v.exit for v in timeline.visits[branch]], after))
                elif callees and self.dataflow.graph.unique_caller(callees[0]) is not instr:
                    callee = callees[0]  # a call with several sites: copy in, copy out
                    for param in callee.parameters:
                        before += [(buf(instr.operands[param.parameter_number], i), buf(param, i), at(param, i).size)
                                   for i in leaf_indices(param.shape)]
                    starts = [v.start for v in timeline.visits[callee] if v.caller is instr]
                    after = [(buf(callee.root, i), buf(instr, i), at(instr, i).size) for i in leaves]
                    afters.append((("after", instr, 0), [e for _, e in timeline.spans[instr]], after))
                if before:
                    boundaries.append((("before", instr), starts, before))
                boundaries += afters
        boundaries.append((("exit",), [timeline.end], exit_copies))
        plans = {}
        for key, ticks, copies in boundaries:
            ordered = self._sequence(copies, ticks)
            if ordered:
                plans[key] = ordered
        return plans

    def _sequence(self, copies: list[Copy], ticks: list[int]) -> list[Copy]:
        """Order a parallel copy so that every buffer is read before it is overwritten; break each
        cycle by saving one destination in a scratch buffer first."""
        moves = [list(c) for c in copies if c[0] is not c[1]]
        pending = {id(m[1]): m for m in moves}
        if len(pending) != len(moves):
            raise HloError("internal: two copies at one boundary write the same buffer")
        readers = Counter(id(m[0]) for m in moves)
        ready = deque(m for m in moves if readers[id(m[1])] == 0)
        ordered: list[Copy] = []
        scratch = None
        while pending:
            while ready:
                source, destination, size = ready.popleft()
                ordered.append((source, destination, size))
                del pending[id(destination)]
                readers[id(source)] -= 1
                if readers[id(source)] == 0 and id(source) in pending:
                    ready.append(pending[id(source)])
            if not pending:
                break
            move = next(iter(pending.values()))  # every pending destination is still to be read
            blocked = move[1]
            blocked_readers = [m for m in pending.values() if m[0] is blocked]
            size = max(m[2] for m in blocked_readers)
            if scratch is None or readers[id(scratch)] > 0:
                scratch = self._pseudo_buffer(max(m[2] for m in moves), ticks, "copy scratch")
            ordered.append((blocked, scratch, size))
            for m in blocked_readers:
                m[0] = scratch
            readers[id(scratch)] += len(blocked_readers)
            readers[id(blocked)] = 0
            ready.append(move)
        return ordered
