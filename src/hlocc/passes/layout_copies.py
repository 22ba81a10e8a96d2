"""`layout-copies`: a layout-changing copy wherever a value is forwarded into a position that
declares another layout for it (what XLA's layout assignment does with AddCopyForOperand, and what
its layout-sensitive verifier then requires).

Forwarding positions move no data: buffer assignment gives the value and the position one buffer.
A kernel reading the position uses the layout the position declares, so if that differs from the
layout the bytes were written in, it reads the elements permuted. The positions:

    tuple(..., x, ...)                   element i of the tuple's shape      ← x
    get-tuple-element(t), index=i        the gte's shape                     ← element i of t
    while(init)                          the while's shape                   ← init, the body's root
                                         the body's and condition's parameter ← the while's shape
    conditional(p, a0, ..., an)          branch k's parameter                ← ak; the conditional ← roots
    call(a0, ..., an)                    the callee's parameters             ← ai; the call ← its root
    opt-barrier(x)                       the barrier's shape                 ← x

Where the layouts differ, a `copy` to the declared layout is inserted (for a tuple-shaped value, its
elements are taken apart, the differing leaves copied and a tuple rebuilt). A parameter or
get-tuple-element that declares another layout than what it receives takes the received layout
and is copied to the declared one for its users. Only layouts are compared (`minor_to_major`), never
dimensions or dynamic bounds. The entry's parameters and result are the runtime's business (it
converts arguments and reads results with the layout their buffers hold). Fusion bodies are not
visited: a fusion's parameters take their operands' buffers as the emitters index them.
"""

from __future__ import annotations

from hlocc.hlo.call_graph import fusion_computations
from hlocc.hlo.ir import HloComputation, HloInstruction, HloModule
from hlocc.hlo.types import Shape
from hlocc.passes.base import HloPass, register_hlo_pass


def layouts_differ(have: Shape, want: Shape) -> bool:
    """Whether bytes laid out as `have` would be read wrongly as `want` (leaf by leaf)."""
    if have.is_tuple or want.is_tuple:
        return any(layouts_differ(a, b) for a, b in zip(have.tuple_shapes, want.tuple_shapes))
    return have.is_array and want.is_array and have.rank > 1 and have.minor_to_major != want.minor_to_major


def relayout(comp: HloComputation, value: HloInstruction, want: Shape) -> HloInstruction:
    """`value` with `want`'s layouts: itself where they agree, else a copy (per leaf for tuples)."""
    have = value.shape
    if not layouts_differ(have, want):
        return value
    if not have.is_tuple:
        return comp.add("copy", [value], shape=have.with_layout(want.layout))
    elements = []
    for i, (h, w) in enumerate(zip(have.tuple_shapes, want.tuple_shapes)):
        element = comp.add("get-tuple-element", [value], {"index": i}, shape=h)
        elements.append(relayout(comp, element, w))
    return comp.add("tuple", elements, shape=Shape.tuple([e.shape for e in elements]))


def _receive(comp: HloComputation, instr: HloInstruction, received: Shape) -> bool:
    """Make `instr` (a parameter or get-tuple-element) take the `received` layout and give its users
    a copy with the layout it declared."""
    declared = instr.shape
    if not layouts_differ(received, declared):
        return False
    users = list(instr.users)
    instr.shape = _with_leaf_layouts(declared, received)
    fixed = relayout(comp, instr, declared)
    for user in users:
        user.replace_operand(instr, fixed)
    if comp.root is instr:
        comp.root = fixed
    return True


def _with_leaf_layouts(shape: Shape, source: Shape) -> Shape:
    """`shape` (dimensions, dynamic bounds) with `source`'s layouts."""
    if shape.is_tuple:
        return Shape.tuple([_with_leaf_layouts(s, o) for s, o in zip(shape.tuple_shapes, source.tuple_shapes)])
    return shape.with_layout(source.layout) if shape.is_array else shape


def _feed(comp: HloComputation, instr: HloInstruction, index: int, want: Shape) -> bool:
    """Give operand `index` of `instr` the layouts `want` declares."""
    operand = instr.operands[index]
    fixed = relayout(comp, operand, want)
    if fixed is operand:
        return False
    instr.set_operand(index, fixed)
    return True


def _return(callee: HloComputation, want: Shape) -> bool:
    """Make `callee`'s root carry `want`'s layouts."""
    fixed = relayout(callee, callee.root, want)
    if fixed is callee.root:
        return False
    callee.root = fixed
    return True


def _fix_instruction(comp: HloComputation, instr: HloInstruction) -> bool:
    op, changed = instr.opcode, False
    if op == "tuple":
        for i, element in enumerate(instr.shape.tuple_shapes):
            changed |= _feed(comp, instr, i, element)
    elif op == "get-tuple-element":
        changed |= _receive(comp, instr, instr.operands[0].shape.tuple_shapes[instr.attrs["index"]])
    elif op == "opt-barrier":
        changed |= _feed(comp, instr, 0, instr.shape)
    elif op == "while":
        changed |= _feed(comp, instr, 0, instr.shape)
        for callee in (instr.attrs["body"], instr.attrs["condition"]):
            changed |= _receive(callee, callee.parameter(0), instr.shape)
        changed |= _return(instr.attrs["body"], instr.shape)
    elif op == "conditional":
        for k, branch in enumerate(_branches(instr)):
            changed |= _feed(comp, instr, k + 1, branch.parameter(0).shape)
            changed |= _return(branch, instr.shape)
    elif op == "call":
        callee = instr.to_apply
        for i, param in enumerate(callee.parameters):
            changed |= _feed(comp, instr, i, param.shape)
        changed |= _return(callee, instr.shape)
    return changed


def _branches(instr: HloInstruction) -> list[HloComputation]:
    if "branch_computations" in instr.attrs:
        return list(instr.attrs["branch_computations"])
    return [instr.attrs["true_computation"], instr.attrs["false_computation"]]


@register_hlo_pass
class LayoutCopies(HloPass):
    """See the module doc."""

    name = "layout-copies"

    def run(self, module: HloModule) -> bool:
        fused = {id(c) for c in fusion_computations(module)}
        changed = False
        for comp in module.computation_post_order():
            if id(comp) in fused:
                continue
            for instr in list(comp.instructions):
                changed |= _fix_instruction(comp, instr)
        return changed
