"""The flattened timeline of a scheduled module and the live interval of every value (in the spirit
of XLA's HloLiveRange).

Every sequential computation runs inside the instruction that calls it, so the module is one
sequence of integer *ticks*: the entry's schedule, with each calling instruction's callees laid out
between a start tick and an end tick of their own:

    while:        ws | condition | body | we        (the state is read at ws, the result defined at we)
    conditional:  cs | branch 0 | branch 1 ... | ce (only one branch runs; laying them out in turn is
                                                    conservative and lets branches reuse each other's memory)
    call:         cs | callee | ce

A visit of a computation is `start | instructions... | exit`: parameters are defined at `start`, the
root is read by the caller at `exit`. A computation with several call sites is visited once per site.
A value is live on the closed interval [definition tick, last use tick]. A while condition's
parameter is live to the condition's exit: the body and the result inherit that state unchanged.
Values used by a calling
instruction are live across the part of it that reads them (a while's init only at ws, since ws
copies it into the state), and a value whose instruction runs in several visits is live over the
hull of them. The entry's root is read at the entry's exit: `Timeline.end`.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlocc.hlo.call_graph import CallGraph, sequential_callees
from hlocc.hlo.ir import HloComputation, HloInstruction
from hlocc.runtime.dataflow import HloDataflow, HloValue, leaf_indices
from hlocc.runtime.schedule import HloSchedule


@dataclass(frozen=True)
class Visit:
    """One run of `computation` on the timeline."""

    computation: HloComputation
    caller: HloInstruction | None
    start: int
    exit: int


@dataclass(frozen=True)
class Step:
    """A point where buffer sharing is decided, in tick order (first visits only): `instr` at its
    tick; `while_enter` (init into state); `body_exit`/`branch_exit` (root into the result)."""

    kind: str
    tick: int
    instr: HloInstruction
    region: int = 0


class Timeline:
    """Ticks of every instruction (one `(start, end)` span per visit), visits, decision steps."""

    def __init__(self, graph: CallGraph, schedule: HloSchedule):
        self.graph = graph
        self.schedule = schedule
        self.spans: dict[HloInstruction, list[tuple[int, int]]] = {}
        self.visits: dict[HloComputation, list[Visit]] = {}
        self.steps: list[Step] = []
        self.root_reads: list[tuple[HloComputation, int]] = []
        self.parameter_reads: list[tuple[HloComputation, int]] = []
        self._next = 0
        entry = graph.module.entry
        visit = self._flatten(entry, None)
        self.end = visit.exit
        self.root_reads.append((entry, visit.exit))

    def _tick(self) -> int:
        self._next += 1
        return self._next - 1

    def _flatten(self, comp: HloComputation, caller: HloInstruction | None) -> Visit:
        start = self._tick()
        for instr in self.schedule.sequence(comp):
            spans = self.spans.setdefault(instr, [])
            callees = sequential_callees(instr)
            if instr.opcode == "parameter":
                spans.append((start, start))
            elif not callees:
                t = self._tick()
                spans.append((t, t))
                if len(spans) == 1:
                    self.steps.append(Step("instr", t, instr))
            else:
                self._flatten_call(instr, callees, spans)
        visit = Visit(comp, caller, start, self._tick())
        self.visits.setdefault(comp, []).append(visit)
        return visit

    def _flatten_call(self, instr: HloInstruction, callees: list[HloComputation], spans: list) -> None:
        first = not spans
        s = self._tick()
        if first and instr.opcode == "while":
            self.steps.append(Step("while_enter", s, instr))
        for region, callee in enumerate(callees):
            visit = self._flatten(callee, instr)
            if instr.opcode in ("while", "conditional"):
                self.root_reads.append((callee, visit.exit))
            if instr.opcode == "while" and region == 0:
                # The body and the loop's result inherit the state the condition saw: the condition
                # must leave its parameter intact, so the parameter is live to the condition's exit.
                self.parameter_reads.append((callee, visit.exit))
            if first and instr.opcode == "conditional":
                self.steps.append(Step("branch_exit", visit.exit, instr, region))
            if first and instr.opcode == "while" and region == 1:
                self.steps.append(Step("body_exit", visit.exit, instr))
        e = self._tick()
        spans.append((s, e))
        if self.graph.unique_caller(callees[0]) is not instr:  # call/async-start with several sites
            self.root_reads.append((callees[0], e))

    def is_single_visit(self, instr: HloInstruction) -> bool:
        return len(self.spans.get(instr, ())) == 1

    def tick(self, instr: HloInstruction) -> int:
        """The tick of an instruction that runs once and calls nothing."""
        return self.spans[instr][0][0]


class Liveness:
    """`interval(value) -> (start, end)`: the closed range of ticks in which the value is live."""

    def __init__(self, dataflow: HloDataflow, timeline: Timeline):
        self.timeline = timeline
        self._interval: dict[int, tuple[int, int]] = {}
        last_use: dict[int, int] = {}
        reads = [(comp.root, tick) for comp, tick in timeline.root_reads]
        reads += [(param, tick) for comp, tick in timeline.parameter_reads for param in comp.parameters]
        for instr, tick in reads:
            for index in leaf_indices(instr.shape):
                value = dataflow.value_at(instr, index)
                last_use[value.id] = max(last_use.get(value.id, -1), tick)
        for value in dataflow.values:
            start = min(self._definition_tick(value.instruction, s) for s in timeline.spans[value.instruction])
            end = max(start, last_use.get(value.id, start))
            for use in value.uses:
                for span in timeline.spans[use.instruction]:
                    end = max(end, self._use_tick(use.instruction, span))
            self._interval[value.id] = (start, end)

    def interval(self, value: HloValue) -> tuple[int, int]:
        return self._interval[value.id]

    def _definition_tick(self, instr: HloInstruction, span: tuple[int, int]) -> int:
        # A calling instruction defines its own values (a while's result, a conditional's result,
        # a multi-site call's copied-out result) when its callees are done.
        return span[1] if sequential_callees(instr) else span[0]

    def _use_tick(self, instr: HloInstruction, span: tuple[int, int]) -> int:
        callees = sequential_callees(instr)
        if not callees:
            return span[0]
        if instr.opcode in ("call", "async-start") and self.timeline.graph.unique_caller(callees[0]) is not instr:
            return span[1]  # operands are copied into the callee's parameters, which are live by then
        return span[0]  # read when the instruction starts; the callees read the values they forward
