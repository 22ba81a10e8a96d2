"""Sequential schedules: the order in which the runtime runs the instructions of each sequential
computation (XLA's HloSchedule and its memory schedulers, hlo_memory_scheduler.cc).

Algorithms (`schedule_module(module, algorithm)`):
- `post-order`: a depth-first post-order from the root (operands before users); the baseline.
- `list`: a memory-aware list scheduler in the spirit of XLA's ListScheduler. Among the ready
  instructions it runs the one that frees the most bytes net of what it allocates (bytes of values
  it reads for the last time minus bytes it defines); ties go to the earlier instruction in
  post-order, so a sequence with no memory effects stays depth-first. Priorities change only when
  a value is down to its last unscheduled reader, so the scheduler runs in O(E log N).
- `module-order`: the instructions as the module lists them (for `is_scheduled=true` text).
- `default`: per computation, the list or the post-order schedule, whichever has the lower peak of
  live bytes (XLA's DefaultMemoryScheduler picks among its schedulers the same way).

Bytes here count the values an instruction defines (dataflow.py: forwarding ops define none);
parameters, constants and a computation's root values are never freed by it.
"""

from __future__ import annotations

import heapq
import re
from dataclasses import dataclass, field

from hlocc.errors import HloError
from hlocc.hlo.ir import HloComputation, HloInstruction, HloModule
from hlocc.runtime.dataflow import HloDataflow, leaf_indices

ALGORITHMS = ("default", "list", "post-order", "module-order")

_NAME_RE = re.compile(r"%?([A-Za-z_][\w.\-]*)")


def control_predecessors(instr: HloInstruction, by_name: dict[str, HloInstruction]) -> list[HloInstruction]:
    """The instructions named by `control-predecessors={a, b}`."""
    raw = instr.attrs.get("control-predecessors")
    if raw is None:
        return []
    preds = []
    for name in _NAME_RE.findall(str(raw)):
        if name not in by_name:
            raise HloError(f"'{instr.name}': control predecessor '{name}' is not in computation "
                           f"'{instr.parent.name}'")
        preds.append(by_name[name])
    return preds


def _predecessors(comp: HloComputation) -> dict[HloInstruction, list[HloInstruction]]:
    """Operands and control predecessors of every instruction, each listed once."""
    by_name = None
    preds = {}
    for instr in comp.instructions:
        ps = instr.operands
        if "control-predecessors" in instr.attrs:
            by_name = by_name or {i.name: i for i in comp.instructions}
            ps = ps + control_predecessors(instr, by_name)
        preds[instr] = list({id(p): p for p in ps}.values()) if len(ps) > 1 else list(ps)
    return preds


def post_order_sequence(comp: HloComputation, preds: dict | None = None) -> list[HloInstruction]:
    """Depth-first post-order from the root, then from every instruction the root does not reach
    (iterative: no recursion limit); control predecessors count as operands."""
    preds = preds or _predecessors(comp)
    seen: set[int] = set()
    order: list[HloInstruction] = []
    starts = ([comp.root] if comp.root is not None else []) + comp.instructions
    for start in starts:
        if id(start) in seen:
            continue
        seen.add(id(start))
        stack = [(start, 0)]
        while stack:
            node, i = stack[-1]
            if i < len(preds[node]):
                stack[-1] = (node, i + 1)
                child = preds[node][i]
                if id(child) not in seen:
                    seen.add(id(child))
                    stack.append((child, 0))
            else:
                stack.pop()
                order.append(node)
    return order


@dataclass
class _MemoryModel:
    """Per computation: bytes each instruction defines, and the freeable values each one reads."""

    defined: dict[HloInstruction, int] = field(default_factory=dict)
    reads: dict[HloInstruction, list[tuple[int, int]]] = field(default_factory=dict)  # (value id, size)
    readers: dict[int, list[HloInstruction]] = field(default_factory=dict)
    dead_on_arrival: dict[HloInstruction, int] = field(default_factory=dict)


def _memory_model(comp: HloComputation, dataflow: HloDataflow) -> _MemoryModel:
    model = _MemoryModel()
    live_out = {dataflow.value_at(comp.root, i).id for i in leaf_indices(comp.root.shape)}
    in_comp = set(map(id, comp.instructions))
    for instr in comp.instructions:
        freeable = [v for v in dataflow.values_defined_by(instr)
                    if instr.opcode not in ("parameter", "constant") and v.id not in live_out]
        model.defined[instr] = sum(v.size for v in freeable)
        model.reads.setdefault(instr, [])
        for v in freeable:
            readers = []
            for use in v.uses:
                user = use.instruction
                if id(user) in in_comp and user not in readers:
                    readers.append(user)
            model.readers[v.id] = readers
            if not readers:
                model.dead_on_arrival[instr] = model.dead_on_arrival.get(instr, 0) + v.size
            for user in readers:
                model.reads.setdefault(user, []).append((v.id, v.size))
    return model


def estimate_peak_bytes(comp: HloComputation, sequence: list[HloInstruction], dataflow: HloDataflow,
                        model: _MemoryModel | None = None) -> int:
    """Peak of the bytes of live values defined in `comp` when it runs in `sequence` order (what a
    perfect packer would need for them; buffer sharing can only lower it)."""
    model = model or _memory_model(comp, dataflow)
    remaining = {v: len(r) for v, r in model.readers.items()}
    live = peak = 0
    for instr in sequence:
        live += model.defined[instr]
        peak = max(peak, live)
        live -= model.dead_on_arrival.get(instr, 0)
        for value_id, size in model.reads[instr]:
            remaining[value_id] -= 1
            if remaining[value_id] == 0:
                live -= size
    return peak


def list_sequence(comp: HloComputation, dataflow: HloDataflow, model: _MemoryModel | None = None,
                  preds: dict | None = None) -> list[HloInstruction]:
    """The memory-aware list schedule (see the module docstring)."""
    model = model or _memory_model(comp, dataflow)
    preds = preds or _predecessors(comp)
    rank = {id(instr): i for i, instr in enumerate(post_order_sequence(comp, preds))}
    successors: dict[int, list[HloInstruction]] = {id(i): [] for i in comp.instructions}
    waiting = {}
    for instr, ps in preds.items():
        waiting[id(instr)] = len(ps)
        for p in ps:
            successors[id(p)].append(instr)
    remaining = {v: len(r) for v, r in model.readers.items()}
    freed = {id(i): sum(size for v, size in model.reads[i] if remaining[v] == 1) for i in comp.instructions}
    scheduled: set[int] = set()

    def priority(instr):
        return freed[id(instr)] - model.defined[instr]

    ready = [(-priority(i), rank[id(i)], i) for i in comp.instructions if waiting[id(i)] == 0]
    heapq.heapify(ready)
    sequence = []
    while ready:
        neg, _, instr = heapq.heappop(ready)
        if id(instr) in scheduled or -neg != priority(instr):
            continue  # a stale entry: the instruction was scheduled or its priority went up
        scheduled.add(id(instr))
        sequence.append(instr)
        for value_id, size in model.reads[instr]:
            remaining[value_id] -= 1
            if remaining[value_id] == 1:
                last = next(r for r in model.readers[value_id] if id(r) not in scheduled)
                freed[id(last)] += size
                if waiting[id(last)] == 0:
                    heapq.heappush(ready, (-priority(last), rank[id(last)], last))
        for succ in successors[id(instr)]:
            waiting[id(succ)] -= 1
            if waiting[id(succ)] == 0:
                heapq.heappush(ready, (-priority(succ), rank[id(succ)], succ))
    if len(sequence) != len(comp.instructions):
        raise HloError(f"computation '{comp.name}' has a cycle through operands or control predecessors")
    return sequence


class HloSchedule:
    """A sequence of instructions for every sequential computation of a module."""

    def __init__(self, module: HloModule, sequences: dict[HloComputation, list[HloInstruction]],
                 algorithms: dict[HloComputation, str] | None = None):
        self.module = module
        self.sequences = sequences
        self.algorithms = algorithms or {}

    def sequence(self, comp: HloComputation) -> list[HloInstruction]:
        try:
            return self.sequences[comp]
        except KeyError:
            raise HloError(f"the schedule has no sequence for computation '{comp.name}'") from None

    @property
    def computations(self) -> list[HloComputation]:
        return list(self.sequences)

    def verify(self) -> None:
        """Each sequence holds every instruction of its computation once, after its operands and
        control predecessors. Raises HloError naming the first violation."""
        for comp, sequence in self.sequences.items():
            position = {}
            for i, instr in enumerate(sequence):
                if instr.parent is not comp:
                    raise HloError(f"schedule of '{comp.name}' holds '{instr.name}' of another computation")
                if id(instr) in position:
                    raise HloError(f"schedule of '{comp.name}' holds '{instr.name}' twice")
                position[id(instr)] = i
            if len(position) != len(comp.instructions):
                missing = next(i.name for i in comp.instructions if id(i) not in position)
                raise HloError(f"schedule of '{comp.name}' misses '{missing}'")
            for instr, ps in _predecessors(comp).items():
                for p in ps:
                    if position[id(p)] > position[id(instr)]:
                        raise HloError(f"schedule of '{comp.name}' runs '{instr.name}' before its "
                                       f"predecessor '{p.name}'")

    def to_string(self) -> str:
        lines = []
        for comp, sequence in self.sequences.items():
            algorithm = self.algorithms.get(comp)
            lines.append(f"{comp.name}" + (f" ({algorithm})" if algorithm else "") + ":")
            lines.extend(f"  {instr.name}" for instr in sequence)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_string()


def schedule_module(module: HloModule, algorithm: str = "default", *,
                    dataflow: HloDataflow | None = None) -> HloSchedule:
    """Schedule every sequential computation of `module` with `algorithm` (see ALGORITHMS)."""
    if algorithm not in ALGORITHMS:
        raise HloError(f"unknown scheduling algorithm '{algorithm}' (known: {', '.join(ALGORITHMS)})")
    dataflow = dataflow or HloDataflow(module)
    sequences, chosen = {}, {}
    for comp in dataflow.graph.computations:
        if algorithm == "post-order":
            sequences[comp], chosen[comp] = post_order_sequence(comp), "post-order"
        elif algorithm == "module-order":
            sequences[comp], chosen[comp] = list(comp.instructions), "module-order"
        elif algorithm == "list":
            sequences[comp], chosen[comp] = list_sequence(comp, dataflow), "list"
        else:
            model, preds = _memory_model(comp, dataflow), _predecessors(comp)
            candidates = [("post-order", post_order_sequence(comp, preds)),
                          ("list", list_sequence(comp, dataflow, model, preds))]
            name, sequence = min(candidates, key=lambda c: estimate_peak_bytes(comp, c[1], dataflow, model))
            sequences[comp], chosen[comp] = sequence, name
    schedule = HloSchedule(module, sequences, chosen)
    if algorithm == "module-order":
        schedule.verify()
    return schedule
