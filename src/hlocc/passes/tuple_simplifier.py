"""`tuple-simplifier`: remove tuples that are built only to be taken apart (XLA's TupleSimplifier).

    get-tuple-element(tuple(a0, ..., an), index=i)             →  ai
    tuple(gte(x, 0), gte(x, 1), ..., gte(x, n-1))              →  x   (x of the tuple's shape)

Both are exact: a tuple holds its elements unchanged. The second form needs every element of `x`,
in order, and `x`'s shape, layouts included. A get-tuple-element of a tuple constant is left to
constant folding. Applies in every computation except fusion bodies.
"""

from __future__ import annotations

from hlocc.hlo.call_graph import fusion_computations
from hlocc.hlo.ir import HloComputation, HloInstruction, HloModule
from hlocc.passes.base import HloPass, register_hlo_pass
from hlocc.passes.dce import remove_dead_roots


def _forwarded_element(gte: HloInstruction) -> HloInstruction | None:
    """The element a get-tuple-element reads from a tuple instruction, if it does."""
    tuple_ = gte.operands[0]
    if tuple_.opcode != "tuple":
        return None
    element = tuple_.operands[gte.attrs["index"]]
    return element if element.shape.same_layout(gte.shape) else None


def _unpacked_tuple(tuple_: HloInstruction) -> HloInstruction | None:
    """`x` when `tuple_` is tuple(gte(x, 0), ..., gte(x, n-1)) of x's shape."""
    if not tuple_.operands or any(o.opcode != "get-tuple-element" for o in tuple_.operands):
        return None
    source = tuple_.operands[0].operands[0]
    if not source.shape.is_tuple or len(source.shape.tuple_shapes) != len(tuple_.operands):
        return None
    for i, element in enumerate(tuple_.operands):
        if element.operands[0] is not source or element.attrs["index"] != i:
            return None
    return source if source.shape.same_layout(tuple_.shape) else None


def simplify_tuples(comp: HloComputation) -> bool:
    replaced = []
    for instr in comp.post_order():
        if instr.opcode == "get-tuple-element":
            replacement = _forwarded_element(instr)
        elif instr.opcode == "tuple":
            replacement = _unpacked_tuple(instr)
        else:
            continue
        if replacement is not None:
            instr.replace_all_uses_with(replacement)
            replaced.append(instr)
    remove_dead_roots(comp, replaced)
    return bool(replaced)


@register_hlo_pass
class TupleSimplifier(HloPass):
    """Forwards tuple elements through get-tuple-element and drops tuple(gte(x, i)...) rebuilds."""

    name = "tuple-simplifier"

    def run(self, module: HloModule) -> bool:
        fused = fusion_computations(module)
        changed = False
        for comp in module.computations:
            if id(comp) not in fused:
                changed |= simplify_tuples(comp)
        return changed
