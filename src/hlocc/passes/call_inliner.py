"""`call-inliner`: replace every `call` by a copy of the called computation's body (XLA's
CallInliner, which GpuCompiler runs before simplification so that the other passes see across
call boundaries).

The callee's instructions are cloned into the caller in post order, its parameters standing for the
call's operands, and the call's users then use the clone of the callee's root. Computations are
processed callees first, so an inlined body holds no calls. Calls with control dependencies, and
calls into a computation of another execution thread, are kept. Computations left without callers
are removed.

A library custom call of XLA:GPU's (`__cublas$gemm`: hlo/library_calls.py) is a call of its
expansion, and is inlined the same way: the dot it holds then takes the backend's gemm path.
"""

from __future__ import annotations

from hlocc.hlo import library_calls
from hlocc.hlo.call_graph import callers, control_referenced_names, has_control_dependencies
from hlocc.hlo.ir import HloComputation, HloInstruction, HloModule
from hlocc.passes.base import HloPass, register_hlo_pass


def inline_call(call: HloInstruction, callee: HloComputation | None = None) -> HloInstruction:
    """Inline one call (or another instruction that calls `callee` with its operands as parameters,
    such as a fusion); returns the instruction that replaced it."""
    caller: HloComputation = call.parent
    callee = callee if callee is not None else call.to_apply
    clones: dict[int, HloInstruction] = {}
    for param in callee.parameters:
        clones[id(param)] = call.operands[param.parameter_number]
    for instr in callee.post_order():
        if id(instr) in clones:
            continue
        clone = instr.clone([clones[id(o)] for o in instr.operands], name=caller.unique_name(instr.name))
        clones[id(instr)] = caller.add_fresh(clone)
    replacement = clones[id(callee.root)]
    call.replace_all_uses_with(replacement)
    caller.remove_instructions([call])
    return replacement


def _inlinable(call: HloInstruction, referenced: set[str]) -> bool:
    callee = call.attrs.get("to_apply")
    return (isinstance(callee, HloComputation) and not has_control_dependencies(call, referenced)
            and callee.execution_thread == call.parent.execution_thread)


@register_hlo_pass
class CallInliner(HloPass):
    """Inlines every call instruction."""

    name = "call-inliner"

    def run(self, module: HloModule) -> bool:
        inlined: dict[int, HloComputation] = {}
        changed = False
        for comp in module.computation_post_order():
            referenced = control_referenced_names(comp)
            for call in [i for i in comp.instructions if i.opcode == "call"]:
                if _inlinable(call, referenced):
                    inlined[id(call.to_apply)] = call.to_apply
                    inline_call(call)
            for call in [i for i in comp.instructions if library_calls.is_library_call(i)]:
                if call.name not in referenced:
                    inline_call(call, library_calls.expansion(call))
                    changed = True
        if not inlined:
            return changed
        remaining = callers(module)
        module.remove_computations([c for key, c in inlined.items()
                                    if not remaining.get(key) and c is not module.entry])
        return True
