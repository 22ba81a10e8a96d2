"""`while-loop-simplifier` (a subset of XLA's WhileLoopSimplifier): shrink the loop state.

For a while loop whose state is a tuple:

1. Loop-invariant results: when the body passes element i through unchanged (root operand i is
   get-tuple-element(parameter, i)), the loop's result element i is its initial value, whatever
   the trip count; readers of get-tuple-element(while, i) read the initial value instead.
2. Dead elements: element i is dead when the loop's users do not read it, the condition does not
   read it, no side-effecting body instruction depends on it, and in the body it only flows into
   the root's element i (or into other dead elements). Dead elements are dropped from the state:
   the body's and condition's parameter, the root tuple, the initial tuple and every
   get-tuple-element index are rewritten, and what computed the dead elements is removed.

The body and condition must be called by this loop alone, read their parameter only through
get-tuple-element, have a tuple instruction as the body root, and hold no control dependencies;
other loops are left alone. One element is always kept. Both rewrites keep every observable value.
"""

from __future__ import annotations

from hlocc.hlo.call_graph import callers
from hlocc.hlo.ir import HloComputation, HloInstruction, HloModule
from hlocc.hlo.types import Shape
from hlocc.passes.base import HloPass, register_hlo_pass
from hlocc.passes.dce import remove_dead_instructions, remove_dead_roots


def _gte_users(param: HloInstruction) -> list[HloInstruction] | None:
    """The users of a tuple value, when all of them are get-tuple-elements."""
    users = param.users
    return users if all(u.opcode == "get-tuple-element" for u in users) else None


def _eligible(loop: HloInstruction, caller_map: dict[int, list[HloInstruction]]) -> bool:
    body, cond = loop.attrs.get("body"), loop.attrs.get("condition")
    if body is None or cond is None or body is cond or not loop.shape.is_tuple:
        return False
    if len(caller_map.get(id(body), [])) != 1 or len(caller_map.get(id(cond), [])) != 1:
        return False
    if body.root.opcode != "tuple" or body.root.users or body.num_parameters != 1 or cond.num_parameters != 1:
        return False
    if any("control-predecessors" in i.attrs for c in (body, cond) for i in c.instructions):
        return False
    return _gte_users(body.parameter(0)) is not None and _gte_users(cond.parameter(0)) is not None


def forward_invariant_results(loop: HloInstruction) -> bool:
    """Rewrite 1: readers of a passed-through element read the loop's initial value."""
    body = loop.attrs["body"]
    param = body.parameter(0)
    init = loop.operands[0]
    forwarded = []
    for user in list(loop.users):
        if user.opcode != "get-tuple-element" or not (user.users or user is loop.parent.root):
            continue
        i = user.attrs["index"]
        element = body.root.operands[i]
        if not (element.opcode == "get-tuple-element" and element.operands[0] is param and element.attrs["index"] == i):
            continue
        if not init.shape.tuple_shapes[i].same_layout(user.shape):
            continue
        if init.opcode == "tuple":
            replacement = init.operands[i]
        else:
            replacement = loop.parent.add("get-tuple-element", [init], {"index": i}, shape=user.shape)
        user.replace_all_uses_with(replacement)
        forwarded.append(user)
    remove_dead_roots(loop.parent, forwarded)
    return bool(forwarded)


def live_elements(loop: HloInstruction) -> set[int]:
    """The state elements that matter (see rule 2), by a fixed point over body dependencies."""
    body, cond = loop.attrs["body"], loop.attrs["condition"]
    count = len(loop.shape.tuple_shapes)
    if loop.parent.root is loop or any(u.opcode != "get-tuple-element" for u in loop.users):
        return set(range(count))
    live = {u.attrs["index"] for u in loop.users} | {u.attrs["index"] for u in cond.parameter(0).users}
    depends = _element_dependencies(body)
    memo: dict[int, bool] = {}
    for instr in body.instructions:
        if instr.has_side_effect(memo):
            live.update(_bits(depends[id(instr)]))
    pending = list(live)
    while pending:
        j = pending.pop()
        for i in _bits(depends[id(body.root.operands[j])]):
            if i not in live:
                live.add(i)
                pending.append(i)
    return live


def _element_dependencies(body: HloComputation) -> dict[int, int]:
    """For each body instruction, a bit set of the state elements it depends on."""
    param = body.parameter(0)
    depends: dict[int, int] = {}
    for instr in body.post_order():
        if instr.opcode == "get-tuple-element" and instr.operands[0] is param:
            depends[id(instr)] = 1 << instr.attrs["index"]
        else:
            bits = 0
            for op in instr.operands:
                bits |= depends[id(op)]
            depends[id(instr)] = bits
    return depends


def _bits(mask: int) -> list[int]:
    return [i for i in range(mask.bit_length()) if mask >> i & 1]


def remove_dead_elements(loop: HloInstruction, live: set[int]) -> HloInstruction:
    """Rewrite 2: a new loop carrying only the `live` elements; returns it."""
    body, cond = loop.attrs["body"], loop.attrs["condition"]
    kept = sorted(live)
    new_index = {old: new for new, old in enumerate(kept)}
    state = Shape.tuple([loop.shape.tuple_shapes[i] for i in kept])

    body.root = body.add("tuple", [body.root.operands[i] for i in kept], shape=state)
    for comp in (body, cond):
        remove_dead_instructions(comp)
        param = comp.parameter(0)
        param.shape = state
        for gte in param.users:
            gte.attrs["index"] = new_index[gte.attrs["index"]]

    comp = loop.parent
    init = loop.operands[0]
    if init.opcode == "tuple":
        elements = [init.operands[i] for i in kept]
    else:
        elements = [comp.add("get-tuple-element", [init], {"index": i}, shape=loop.shape.tuple_shapes[i]) for i in kept]
    new_init = comp.add("tuple", elements, shape=state)
    new_loop = loop.clone([new_init], shape=state)  # keeps the loop's name, free once it is removed
    for gte in list(loop.users):
        gte.replace_operand(loop, new_loop)
        gte.attrs["index"] = new_index[gte.attrs["index"]]
    comp.remove_instructions([loop])
    comp.add_fresh(new_loop)
    remove_dead_roots(comp, [init])
    return new_loop


@register_hlo_pass
class WhileLoopSimplifier(HloPass):
    """Forwards loop-invariant results and removes dead loop-carried values."""

    name = "while-loop-simplifier"

    def run(self, module: HloModule) -> bool:
        caller_map = callers(module)
        changed = False
        for comp in module.computation_post_order():
            for loop in [i for i in comp.instructions if i.opcode == "while"]:
                if not _eligible(loop, caller_map):
                    continue
                changed |= forward_invariant_results(loop)
                if loop.parent is None:  # every result it had forwarded: the loop was dead, and removed
                    continue
                live = live_elements(loop)
                if live and len(live) < len(loop.shape.tuple_shapes):
                    remove_dead_elements(loop, live)
                    changed = True
        return changed
