"""`dot-canonicalize`: rewrite dots into the canonical form a gemm library call takes (XLA's
DotDimensionSorter + DotDecomposer; the form is described in passes/dot_dims.py):

    lhs [batch..., m, k] | [batch..., k, m]    rhs [batch..., k, n] | [batch..., n, k]

1. Sort the contracting dimension pairs by the lhs dimension (DotDimensionSorter). This changes
   nothing but the order the pairs are listed in, and lets contiguous dims collapse by reshape.
2. An operand whose batch dims lead (in the dot's batch order) and whose contracting dims and free
   dims each form a contiguous increasing run needs only a reshape — free for a row-major array —
   that collapses each run into one dimension (a size-1 dimension where a run is empty). The rhs's
   contracting run must list its dims in the lhs's pair order.
3. Any other operand needs a transpose into [batch..., free..., contracting...] (lhs) or
   [batch..., contracting..., free...] (rhs) first. A transpose copies the operand, so it is made
   only when the dot does at least TRANSPOSE_WORK_RATIO multiply-adds per copied element
   ("only if cheap"); otherwise the dot stays as it is.
4. The canonical dot's [batch..., m, n] result is reshaped back to the original result shape.

The value of each result element is the same sum over the same products; only the order in which
a backend accumulates them may differ, which XLA leaves unspecified for dot anyway. Dots without
contracting dims (outer products), with dynamic dims, and already canonical dots are left alone.
"""

from __future__ import annotations

from math import prod

from hlocc.hlo.ir import HloComputation, HloInstruction, HloModule
from hlocc.hlo.types import Shape
from hlocc.passes.base import HloPass, register_hlo_pass
from hlocc.passes.dce import replace_outside_fusions
from hlocc.passes.dot_dims import DotDims, dot_attrs, is_canonical

TRANSPOSE_WORK_RATIO = 4


def sorted_contracting(dims: DotDims) -> DotDims:
    """The contracting pairs listed in increasing lhs dimension order."""
    pairs = sorted(zip(dims.lhs_contracting, dims.rhs_contracting))
    return DotDims(tuple(p[0] for p in pairs), tuple(p[1] for p in pairs), dims.lhs_batch, dims.rhs_batch)


def _contiguous(run: tuple[int, ...]) -> bool:
    return all(b == a + 1 for a, b in zip(run, run[1:]))


def collapsible_order(dims: DotDims, side: int, rank: int) -> str | None:
    """How operand `side` collapses by reshape alone: "free-first" ([batch, free, contracting]) or
    "contracting-first"; None when it needs a transpose. Empty runs fit either order; the lhs then
    prefers [m, k] and the rhs [k, n]."""
    nb = len(dims.lhs_batch)
    batch, contracting, free = dims.batch(side), dims.contracting(side), dims.free(side, rank)
    if batch != tuple(range(nb)) or not _contiguous(contracting) or not _contiguous(free):
        return None
    if not contracting or not free:
        return "free-first" if side == 0 else "contracting-first"
    if free[0] == nb and contracting[0] == nb + len(free):
        return "free-first"
    if contracting[0] == nb and free[0] == nb + len(contracting):
        return "contracting-first"
    return None


_STANDARD = ("free-first", "contracting-first")  # lhs [m, k], rhs [k, n]


def _canonical_operand(comp: HloComputation, operand: HloInstruction, dims: DotDims, side: int,
                       order: str | None) -> tuple[HloInstruction, int]:
    """The operand as [batch..., a, b] and the position of its contracting dim (nb or nb + 1);
    `order` None means it needs a transpose into the standard orientation first."""
    nb, rank = len(dims.lhs_batch), operand.shape.rank
    contracting, free = dims.contracting(side), dims.free(side, rank)
    if order is None:
        order = _STANDARD[side]
        first, second = (free, contracting) if order == "free-first" else (contracting, free)
        operand = comp.add("transpose", [operand], {"dimensions": dims.batch(side) + first + second})
        first, second = tuple(range(nb, nb + len(first))), tuple(range(nb + len(first), rank))
        free, contracting = (first, second) if order == "free-first" else (second, first)
    sizes = operand.shape.dims
    free_size, contracting_size = prod(sizes[d] for d in free), prod(sizes[d] for d in contracting)
    target = sizes[:nb] + ((free_size, contracting_size) if order == "free-first" else (contracting_size, free_size))
    if target != sizes:
        operand = comp.add("reshape", [operand], shape=Shape.array(operand.shape.element_type, target))
    return operand, nb + (1 if order == "free-first" else 0)


def canonicalize_dot(dot: HloInstruction) -> HloInstruction | None:
    """The canonical replacement of `dot` (a reshape of a canonical dot), or None to keep it."""
    lhs, rhs = dot.operands
    if not (lhs.shape.is_static and rhs.shape.is_static and dot.shape.is_static):
        return None
    dims = DotDims.of(dot)
    if not dims.lhs_contracting or is_canonical(dims, lhs.shape.rank, rhs.shape.rank):
        return None
    dims = sorted_contracting(dims)
    orders = [collapsible_order(dims, side, o.shape.rank) for side, o in enumerate(dot.operands)]
    if None in orders and not _transpose_pays_off(dot, dims, orders):
        return None
    comp = dot.parent
    new_lhs, lhs_k = _canonical_operand(comp, lhs, dims, 0, orders[0])
    new_rhs, rhs_k = _canonical_operand(comp, rhs, dims, 1, orders[1])
    nb = len(dims.lhs_batch)
    batch = tuple(range(nb))
    m = prod(lhs.shape.dims[d] for d in dims.free(0, lhs.shape.rank))
    n = prod(rhs.shape.dims[d] for d in dims.free(1, rhs.shape.rank))
    shape = Shape.array(dot.shape.element_type, dot.shape.dims[:nb] + (m, n))
    new_dot = comp.add("dot", [new_lhs, new_rhs], dot_attrs(dot, DotDims((lhs_k,), (rhs_k,), batch, batch)),
                       shape=shape)
    if new_dot.shape.dims == dot.shape.dims:
        new_dot.shape = dot.shape
        return new_dot
    return comp.add("reshape", [new_dot], shape=dot.shape)


def _transpose_pays_off(dot: HloInstruction, dims: DotDims, orders: list[str | None]) -> bool:
    lhs, rhs = dot.operands
    contracted = prod(lhs.shape.dims[d] for d in dims.lhs_contracting)
    work = dot.shape.num_elements * contracted
    copied = sum(o.shape.num_elements for o, order in zip(dot.operands, orders) if order is None)
    return work >= TRANSPOSE_WORK_RATIO * copied


@register_hlo_pass
class DotCanonicalizer(HloPass):
    """Rewrites dots into canonical [batch, m, k] x [batch, k, n] form where that is cheap."""

    name = "dot-canonicalize"

    def run(self, module: HloModule) -> bool:
        return replace_outside_fusions(module, "dot", canonicalize_dot)
