"""`dce`: dead code elimination (XLA's HloDCE).

An instruction is live when the root of its computation uses it (transitively), when it has a side
effect (`HloInstruction.has_side_effect`: send/recv, infeed/outfeed, rng, collectives with a
channel, custom calls marked side-effecting, and any instruction calling a computation that has
one), or when a live instruction names it as a control predecessor. Parameters are never removed
(that would renumber the signature). Every other instruction is removed, then every computation the
entry no longer reaches. A while loop whose body and condition have no side effect is removed when
unused, even if it would not terminate, as in XLA.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from hlocc.hlo.call_graph import (
    control_predecessor_names,
    control_referenced_names,
    fusion_computations,
    reachable_computations,
)
from hlocc.hlo.ir import HloComputation, HloInstruction, HloModule
from hlocc.passes.base import HloPass, register_hlo_pass


def remove_dead_instructions(comp: HloComputation, memo: dict[int, bool] | None = None) -> bool:
    """Remove the dead instructions of `comp` (see the module docstring); linear in its size.
    `memo` caches side-effect facts of called computations. Returns whether anything was removed."""
    memo = {} if memo is None else memo
    by_name = {i.name: i for i in comp.instructions}
    live: set[int] = set()
    stack = [comp.root] + [i for i in comp.instructions if i.opcode == "parameter" or i.has_side_effect(memo)]
    while stack:
        instr = stack.pop()
        if id(instr) in live:
            continue
        live.add(id(instr))
        stack.extend(op for op in instr.operands if id(op) not in live)
        for name in control_predecessor_names(instr):
            pred = by_name.get(name)
            if pred is not None and id(pred) not in live:
                stack.append(pred)
    dead = [i for i in comp.instructions if id(i) not in live]
    comp.remove_instructions(dead)
    return bool(dead)


def replace_outside_fusions(module: HloModule, opcode: str,
                            rewrite: Callable[[HloInstruction], HloInstruction | None]) -> bool:
    """For each `opcode` instruction of the module's unfused computations, `rewrite(instr)` builds
    its replacement in its computation (or returns None to keep it); the uses move to the
    replacement and the replaced instruction is removed with the operands only it used. True when
    anything was replaced (the shared loop of the canonicalizing rewrites: dot, gather, convolution)."""
    fused = fusion_computations(module)
    changed = False
    for comp in module.computations:
        if id(comp) in fused:
            continue
        replaced = []
        for instr in [i for i in comp.instructions if i.opcode == opcode]:
            replacement = rewrite(instr)
            if replacement is not None:
                instr.replace_all_uses_with(replacement)
                replaced.append(instr)
        remove_dead_roots(comp, replaced)
        changed |= bool(replaced)
    return changed


def remove_dead_roots(comp: HloComputation, candidates: Iterable[HloInstruction],
                      memo: dict[int, bool] | None = None) -> int:
    """Remove those of `candidates` that are dead (unused, not the root, not a parameter, no side
    effect, not a control predecessor) and, recursively, the operands only they used (XLA's
    RemoveInstructionAndUnusedOperands). Lets a rewriting pass clean up after itself without
    touching other dead code. Linear in the removed instructions and their operands. Returns how
    many instructions were removed."""
    memo = {} if memo is None else memo
    referenced = control_referenced_names(comp)
    remaining_users: dict[int, int] = {}
    dead: list[HloInstruction] = []
    dead_ids: set[int] = set()
    worklist = list(candidates)
    while worklist:
        instr = worklist.pop()
        if id(instr) in dead_ids or instr.parent is not comp or instr is comp.root or instr.opcode == "parameter":
            continue
        if remaining_users.setdefault(id(instr), len(instr.users)) > 0:
            continue
        if instr.name in referenced or instr.has_side_effect(memo):
            continue
        dead_ids.add(id(instr))
        dead.append(instr)
        for op in {id(o): o for o in instr.operands}.values():
            remaining_users[id(op)] = remaining_users.setdefault(id(op), len(op.users)) - 1
            worklist.append(op)
    comp.remove_instructions(dead)
    return len(dead)


def remove_unreachable_computations(module: HloModule) -> bool:
    """Remove the computations the entry does not reach through called computations."""
    reachable = {id(c) for c in reachable_computations(module)}
    dead = [c for c in module.computations if id(c) not in reachable]
    module.remove_computations(dead)
    return bool(dead)


@register_hlo_pass
class HloDCE(HloPass):
    """Removes dead instructions and unreachable computations."""

    name = "dce"

    def run(self, module: HloModule) -> bool:
        memo: dict[int, bool] = {}
        changed = False
        for comp in module.computations:
            changed |= remove_dead_instructions(comp, memo)
        changed |= remove_unreachable_computations(module)
        return changed
