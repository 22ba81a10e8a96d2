"""`flatten-call-graph`: give every while condition and body and every conditional branch exactly one
call site, by cloning a computation for each further site (XLA's FlattenCallGraph).

The runtime runs these computations as instruction sequences with buffers of their own (the loop
state, a branch's result): a computation shared by two loops, or used as both branches of one
conditional, would need one buffer assignment per use. Cloning makes each use its own computation.
`call` targets are left shared (the runtime copies into and out of a computation called from
several sites), and so are embedded computations (fusions, reducers), which have no buffers.
"""

from __future__ import annotations

from hlocc.hlo.ir import HloComputation, HloModule
from hlocc.passes.base import HloPass, register_hlo_pass

_SEQUENTIAL_ATTRS = {"while": ("condition", "body"),
                     "conditional": ("branch_computations", "true_computation", "false_computation")}


def clone_computation(module: HloModule, comp: HloComputation) -> HloComputation:
    """A copy of `comp` (fresh instruction names; called computations shared), added to `module`."""
    taken = {c.name for c in module.computations}
    name = next(f"{comp.name}.{k}" for k in range(1, len(taken) + 2) if f"{comp.name}.{k}" not in taken)
    clone = HloComputation(name, execution_thread=comp.execution_thread)
    copies = {}
    for instr in comp.post_order():  # every instruction, operands first
        new = instr.clone([copies[id(o)] for o in instr.operands], name=module.unique_name(instr.name))
        copies[id(instr)] = clone.add_instruction(new)
    clone.root = copies[id(comp.root)]
    return module.add_computation(clone)


@register_hlo_pass
class FlattenCallGraph(HloPass):
    """Clones while and conditional computations until each has one call site."""

    name = "flatten-call-graph"

    def run(self, module: HloModule) -> bool:
        changed = False
        progress = True
        while progress:  # a clone's own loops add call sites: repeat until none is shared
            progress = False
            seen: set[int] = set()
            for comp in reversed(module.computation_post_order()):  # callers first
                for instr in comp.instructions:
                    for key in _SEQUENTIAL_ATTRS.get(instr.opcode, ()):
                        value = instr.attrs.get(key)
                        if value is None:
                            continue
                        callees = list(value) if isinstance(value, (list, tuple)) else [value]
                        for k, callee in enumerate(callees):
                            if id(callee) in seen:
                                callees[k] = clone_computation(module, callee)
                                progress = changed = True
                            seen.add(id(callees[k]))
                        instr.attrs[key] = type(value)(callees) if isinstance(value, (list, tuple)) else callees[0]
        return changed
