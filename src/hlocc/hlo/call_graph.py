"""How computations call each other (XLA's CallGraph), for the passes and the runtime.

For the passes, all linear in the module size: which computations are reachable from the entry
(`reachable_computations`), which instructions call a computation (`callers`), which computations
are fusion bodies (`fusion_computations`), and the names control dependencies refer to.

For the runtime: which computations it executes as instruction sequences, and who calls them. A
computation is *sequential* when the runtime runs its instructions one after another, each with
buffers of its own: the entry, while conditions and bodies, conditional branches, the targets of
`call` and the computations of `async-start` (`sequential_callees`, `build_call_graph`). Every
other called computation (fused computations, the scalar `to_apply` of reduce/sort/scatter/
all-reduce/map, custom-call computations) is *embedded*: a kernel or a library call evaluates it,
and its instructions get no buffers (XLA's "thread-local" computations, which BufferAssignment
skips too).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hlocc.errors import HloError, UnsupportedError
from hlocc.hlo.ir import HloComputation, HloInstruction, HloModule

_NAME_RE = re.compile(r"[A-Za-z_%][A-Za-z0-9_.\-%]*")


def reachable_computations(module: HloModule) -> list[HloComputation]:
    """The entry and every computation it calls, directly or not (callers before callees)."""
    return module.entry.reachable_computations()


def callers(module: HloModule) -> dict[int, list[HloInstruction]]:
    """For each computation (by id), the instructions that call it."""
    result: dict[int, list[HloInstruction]] = {id(c): [] for c in module.computations}
    for instr in module.all_instructions():
        for callee in instr.called_computations():
            result.setdefault(id(callee), []).append(instr)
    return result


def fusion_computations(module: HloModule) -> set[int]:
    """Ids of the computations that are bodies of fusion instructions (passes that simplify
    unfused code leave them to the fusion passes, as XLA does)."""
    return {id(i.attrs["calls"]) for i in module.all_instructions()
            if i.opcode == "fusion" and i.attrs.get("calls") is not None}


def control_predecessor_names(instr: HloInstruction) -> list[str]:
    """The instruction names in `instr`'s `control-predecessors={a, b}` attribute (kept as text)."""
    raw = instr.attrs.get("control-predecessors")
    if raw is None:
        return []
    return [name.lstrip("%") for name in _NAME_RE.findall(str(raw))]


def has_control_dependencies(instr: HloInstruction, referenced: set[str]) -> bool:
    """Whether `instr` has control predecessors or is one (its name is in `referenced`)."""
    return "control-predecessors" in instr.attrs or instr.name in referenced


def control_referenced_names(comp: HloComputation) -> set[str]:
    """Names of the instructions of `comp` that some instruction names as a control predecessor."""
    names: set[str] = set()
    for instr in comp.instructions:
        if "control-predecessors" in instr.attrs:
            names.update(control_predecessor_names(instr))
    return names


# -- the runtime's sequential computations ---------------------------------------------------------
def sequential_callees(instr: HloInstruction) -> list[HloComputation]:
    """The computations `instr` runs as sequences, in the order the flattened timeline visits them:
    a while's condition before its body, a conditional's branches by branch index."""
    op = instr.opcode
    if op == "while":
        return [instr.attrs["condition"], instr.attrs["body"]]
    if op == "conditional":
        if "branch_computations" in instr.attrs:
            return list(instr.attrs["branch_computations"])
        return [instr.attrs["true_computation"], instr.attrs["false_computation"]]
    if op == "call":
        return [instr.attrs["to_apply"]]
    if op == "async-start":
        return [instr.attrs["calls"]]
    return []


@dataclass
class CallGraph:
    """The sequential computations of a module (entry first; each after the first caller that reaches
    it) and the call sites of each. A computation with several call sites runs once per site."""

    module: HloModule
    computations: list[HloComputation] = field(default_factory=list)
    call_sites: dict[HloComputation, list[HloInstruction]] = field(default_factory=dict)

    def is_sequential(self, comp: HloComputation | None) -> bool:
        return comp is not None and comp in self.call_sites

    def unique_caller(self, comp: HloComputation) -> HloInstruction | None:
        """The caller of `comp` if it has exactly one call site (None for the entry and for a
        computation called from several places)."""
        sites = self.call_sites[comp]
        return sites[0] if len(sites) == 1 else None


def build_call_graph(module: HloModule) -> CallGraph:
    """Walk from the entry through while/conditional/call/async-start. Raises UnsupportedError for a
    while condition/body or conditional branch shared by several call sites: its state buffers would
    be shared by loops that may be live at once (XLA runs FlattenCallGraph first for the same reason)."""
    if module.entry is None:
        raise HloError(f"module '{module.name}' has no entry computation")
    graph = CallGraph(module)
    graph.call_sites[module.entry] = []
    stack = [module.entry]
    while stack:
        comp = stack.pop()
        graph.computations.append(comp)
        for instr in comp.instructions:
            for callee in sequential_callees(instr):
                sites = graph.call_sites.get(callee)
                if sites is None:
                    graph.call_sites[callee] = [instr]
                    stack.append(callee)
                else:
                    sites.append(instr)
    for comp, sites in graph.call_sites.items():
        control = [s for s in sites if s.opcode in ("while", "conditional")]
        if comp is module.entry and sites:
            raise UnsupportedError(f"entry computation '{comp.name}' is called by '{sites[0].name}'")
        if control and len(sites) > 1:
            names = ", ".join(s.name for s in sites)
            raise UnsupportedError(
                f"computation '{comp.name}' is called by {len(sites)} instructions ({names}); buffer "
                f"assignment needs while/conditional computations with one call site (flatten the call graph)")
    return graph
