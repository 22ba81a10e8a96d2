"""Facts about how computations call each other, shared by the passes: which computations are
reachable from the entry, which instructions call a computation, which computations are fusion
bodies, and the names control dependencies refer to. All linear in the module size."""

from __future__ import annotations

import re

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
