"""Stitch analysis: whether a fused computation can run as one *stitch* kernel (BladeDISC's kStitch
fusion, issue 18), in which a thread takes a whole row, computes the row's reductions one stage
after the other and then the values that read them, broadcast back along the row (softmax,
layernorm, RMSnorm).

A computation is stitchable when, with S the input shape of its first reduce (the *row shape*):

- every reduce reads operands of shape S (dimensions and layout) and reduces the same dimensions,
  of which exactly one has more than one element: the minor-most non-trivial one of S's layout
  (the *row*; its length may be symbolic: the stitch pass then stitches only when asked to
  speculate, `stitch_fusion.speculative_rows`). The other dimensions of S are the *kept* ones: a row per
  element of the reduce's output;
- every value that depends on a reduce ("row-reduced" values) is computed only by ops that read it
  at the same row: elementwise ops, converts, a reshape or bitcast that keeps the kept dimensions
  of more than one element in order (default layouts), a broadcast that sends them back to S's
  kept dimensions (its operand dims of more than one element cover exactly the kept dims of S of
  more than one element), another reduce (a later *stage*), a tuple or get-tuple-element. A value
  that depends on no reduce can be anything the elemental emitter computes (it is computed at the
  index where it is read);
- every root is an array of shape S (written by the row loop) or a row-reduced value with one
  element per row (written once per row).

Stages: a reduce whose operands read the result of another reduce comes after it (softmax: max,
then the sum of exp(x - max)); reduces of the same stage share one pass over the row.

`STITCH_MARKER`, in the backend config of each reduce of a stitch fusion (passes/stitch_fusion.py
puts it there, as gemm fusion marks its dot), says that the fused computation alone is a stitch
fusion: hero analysis gives it the STITCH emitter kind.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlocc.analysis.hero import STITCH_MARKER, is_elementwise, is_stitch_marked
from hlocc.hlo.ir import HloComputation, HloInstruction
from hlocc.hlo.symbolic import Dim, DimExpr
from hlocc.hlo.types import Shape

_ROW_READERS = frozenset({"convert", "tuple", "get-tuple-element"})


@dataclass(frozen=True)
class StitchPlan:
    """The facts the stitch emitter needs: the row shape, its reduced (row) dimension and the kept
    ones, the reduces by stage, and the roots (array leaves) that have the row shape."""

    row_shape: Shape
    row_dim: int
    kept: tuple[int, ...]
    stages: tuple[tuple[HloInstruction, ...], ...]

    @property
    def row_length(self) -> Dim:
        return self.row_shape.dims[self.row_dim]

    @property
    def rows(self) -> Dim:
        n: Dim = 1
        for d in self.kept:
            n = n * self.row_shape.dims[d]
        return n

    @property
    def reduces(self) -> tuple[HloInstruction, ...]:
        return tuple(r for stage in self.stages for r in stage)


class NotStitchable(Exception):
    """Why a computation cannot be stitched (a message naming the instruction)."""


def marked_stitch_plan(comp: HloComputation) -> StitchPlan | None:
    """The stitch plan of a computation the stitch-fusion pass marked, None for any other (or one
    that is not stitchable after all): what the speculation predicates ask of a fused computation."""
    if not any(is_stitch_marked(i) for i in comp.instructions):
        return None
    try:
        return stitch_plan(comp)
    except NotStitchable:
        return None


def stitch_plan(comp: HloComputation) -> StitchPlan:
    """The stitch plan of `comp`, or NotStitchable saying why not (see the module doc)."""
    reduces = [i for i in comp.post_order() if i.opcode == "reduce"]
    if not reduces:
        raise NotStitchable(f"'{comp.name}' has no reduce")
    shape = reduces[0].operand(0).shape
    dims = frozenset(reduces[0].attrs["dimensions"])
    row_dim = _row_dimension(shape, dims, reduces[0])
    kept = tuple(d for d in range(shape.rank) if d not in dims)
    for r in reduces:
        n = len(r.operands) // 2
        if frozenset(r.attrs["dimensions"]) != dims or any(
                not _same(r.operand(k).shape, shape) for k in range(n)):
            raise NotStitchable(f"reduce '{r.name}' does not reduce the rows of {shape}")
    stage: dict[int, int] = {}
    reduced: set[int] = set()  # ids of values that depend on a reduce
    for instr in comp.post_order():
        deps = [op for op in instr.operands if id(op) in reduced]
        depth = max((stage.get(id(op), 0) for op in instr.operands), default=0)
        if instr.opcode == "reduce":
            n = len(instr.operands) // 2
            if any(id(instr.operand(n + k)) in reduced for k in range(n)):
                raise NotStitchable(f"the init value of '{instr.name}' depends on a reduce")
            stage[id(instr)] = depth + 1
            reduced.add(id(instr))
            continue
        stage[id(instr)] = depth
        if not deps:
            continue
        reduced.add(id(instr))
        _check_row_reader(instr, deps, shape, kept)
    for root in (comp.root.operands if comp.root.opcode == "tuple" else [comp.root]):
        if root.shape.is_tuple:
            raise NotStitchable(f"root '{root.name}' is a tuple")
        if not _same(root.shape, shape) and not (id(root) in reduced and _is_per_row(root.shape, shape, kept)):
            raise NotStitchable(f"root '{root.name}' ({root.shape}) is neither a row of {shape} nor one value per row")
    by_stage: dict[int, list[HloInstruction]] = {}
    for r in reduces:
        by_stage.setdefault(stage[id(r)], []).append(r)
    return StitchPlan(shape, row_dim, kept, tuple(tuple(by_stage[s]) for s in sorted(by_stage)))


def _row_dimension(shape: Shape, dims: frozenset[int], reduce: HloInstruction) -> int:
    """The one reduced dimension of more than one element, which must be the minor-most
    non-trivial one of the layout, of static length."""
    wide = [d for d in dims if isinstance(shape.dims[d], DimExpr) or shape.dims[d] > 1]
    minor = [d for d in shape.minor_to_major if isinstance(shape.dims[d], DimExpr) or shape.dims[d] > 1]
    if len(wide) != 1 or not minor or minor[0] != wide[0]:
        raise NotStitchable(f"reduce '{reduce.name}' does not reduce exactly the minor dimension of {shape}")
    return wide[0]


def _same(a: Shape, b: Shape) -> bool:
    return a.is_array and a.dims == b.dims and tuple(a.minor_to_major) == tuple(b.minor_to_major)


def _wide(dims) -> list:
    return [d for d in dims if isinstance(d, DimExpr) or d > 1]


def _row_major(s: Shape) -> bool:
    return list(s.minor_to_major) == list(range(s.rank - 1, -1, -1))


def _is_per_row(s: Shape, row: Shape, kept: tuple[int, ...]) -> bool:
    """One element per row, in the rows' order: the kept dims of more than one element, in order."""
    return s.is_array and _wide(s.dims) == _wide(row.dims[d] for d in kept) and _row_major(s)


def _check_row_reader(instr: HloInstruction, deps: list[HloInstruction], row: Shape, kept: tuple[int, ...]) -> None:
    """`instr` reads row-reduced `deps`: it must read them only at its own row (module doc)."""
    op = instr.opcode
    if is_elementwise(instr) or op in _ROW_READERS:
        return
    if op in ("reshape", "bitcast") and _is_per_row(instr.shape, row, kept) and _is_per_row(deps[0].shape, row, kept):
        return
    if op == "broadcast" and _same(instr.shape, row):
        source = deps[0].shape
        targets = [t for t, n in zip(instr.attrs["dimensions"], source.dims) if isinstance(n, DimExpr) or n > 1]
        wide_kept = [d for d in kept if isinstance(row.dims[d], DimExpr) or row.dims[d] > 1]
        if targets == wide_kept:
            return
    if (op == "broadcast" and _is_per_row(instr.shape, row, kept) and _is_per_row(deps[0].shape, row, kept)
            and list(instr.attrs["dimensions"]) == sorted(instr.attrs["dimensions"])):
        return  # a per-row value given size-1 dims ([?b] → [?b,1], as JAX's keepdims writes it)
    if op == "reduce":
        return
    raise NotStitchable(f"'{instr.name}' ({op}) reads a reduced value at other rows than its own")


__all__ = ["STITCH_MARKER", "NotStitchable", "StitchPlan", "is_stitch_marked", "stitch_plan"]
