"""Algebraic simplifier rules on dots: a transpose feeding a dot is folded into the dot's
dimension numbers (seed 002: "folds Transpose into Dot so that the Transpose can be elided in a
cuBLAS gemm call"; XLA's TransposeFolding).

dot(transpose(x, perm), y) reads dimension d of the transpose as dimension perm[d] of x, so the
contracting and batch dimension numbers map through perm. The result lists the free dimensions in
increasing order, so the fold is exact only when perm keeps the free dimensions in their order.
Like XLA's GPU CanFoldTransposeOperandIntoDot, a fold that would turn a canonical dot (the form
dot-canonicalize makes for library calls, passes/dot_dims.py) into a non-canonical one is not
done, so the two passes do not undo each other.
"""

from __future__ import annotations

from hlocc.hlo.ir import HloInstruction
from hlocc.passes.dot_dims import DotDims, dot_attrs, is_canonical
from hlocc.passes.pattern import Match, Rule, op


def _fold_side(dims: DotDims, side: int, transpose: HloInstruction) -> DotDims | None:
    """`dims` with operand `side` read from the transpose's operand, if that is exact."""
    perm = transpose.attrs["dimensions"]
    free = dims.free(side, transpose.shape.rank)
    mapped_free = [perm[d] for d in free]
    if mapped_free != sorted(mapped_free):
        return None
    contracting = tuple(perm[d] for d in dims.contracting(side))
    return dims.with_side(side, contracting, tuple(perm[d] for d in dims.batch(side)))


def _fold_transposes(m: Match) -> HloInstruction | None:
    dot = m.root
    dims = DotDims.of(dot)
    operands = list(dot.operands)
    for side, operand in enumerate(dot.operands):
        if operand.opcode != "transpose":
            continue
        folded = _fold_side(dims, side, operand)
        if folded is not None:
            dims, operands[side] = folded, operand.operands[0]
    if operands == list(dot.operands):
        return None
    was_canonical = is_canonical(DotDims.of(dot), dot.operands[0].shape.rank, dot.operands[1].shape.rank)
    if was_canonical and not is_canonical(dims, operands[0].shape.rank, operands[1].shape.rank):
        return None
    return m.add("dot", operands, dot_attrs(dot, dims), shape=dot.shape)


def _has_transposed_operand(dot: HloInstruction) -> bool:
    return any(o.opcode == "transpose" for o in dot.operands)


DOT_RULES: tuple[Rule, ...] = (
    Rule("dot(transpose(x), y) → dot(x, y) with mapped dimension numbers",
         op("dot", where=_has_transposed_operand), _fold_transposes),
)
