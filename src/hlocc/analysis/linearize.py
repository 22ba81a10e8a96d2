"""Linear positions of multi-dimensional indices, as affine expressions: `linear_index` (an index to
its physical position under a layout), `delinearize` (a position back to an index, the most major
dimension without `mod`: XLA's DelinearizeInBoundsIndex), and `linearize_map` (the row-major
linearization as an indexing map). The launch maps, op indexing, the bitcast maps, the emitters and
flatten-tensors all linearize through these."""

from __future__ import annotations

from collections.abc import Sequence

from hlocc.analysis.affine_expr import Const, Expr, dim
from hlocc.analysis.indexing_map import IndexingMap, variables_from_sizes


def linear_index(dims: tuple[int, ...], index: list[Expr], minor_to_major=None) -> Expr:
    """The physical linear position of `index` in a shape of `dims` with the given layout."""
    order = list(minor_to_major) if minor_to_major is not None else list(range(len(dims) - 1, -1, -1))
    linear: Expr = Const(0)
    for d in reversed(order):
        linear = linear * dims[d] + index[d]
    return linear


def delinearize(linear: Expr, dims: Sequence[int], minor_to_major: Sequence[int] | None = None) -> list[Expr]:
    """Index expressions (in logical dimension order) of the element at `linear` in the physical
    order given by the layout; the most major dimension gets no `mod`."""
    rank = len(dims)
    order = list(minor_to_major) if minor_to_major is not None else list(range(rank - 1, -1, -1))
    out: list[Expr] = [linear] * rank
    stride = 1
    for position, d in enumerate(order):
        index = linear // stride
        out[d] = index if position == rank - 1 else index % dims[d]
        stride *= dims[d]
    return out


def linearize_map(shape: tuple[int, ...]) -> IndexingMap:
    """The map from a row-major index of `shape` to its linear position (flatten-tensors' form)."""
    expr = 0
    stride = 1
    for i in range(len(shape) - 1, -1, -1):
        expr = dim(i) * stride + expr if stride != 1 else dim(i) + expr
        stride *= shape[i]
    return IndexingMap(variables_from_sizes(shape), (expr,))
