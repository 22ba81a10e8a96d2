"""Bitcast maps (XLA's GetBitcastMap, which XLA keeps in its indexing analysis): between two shapes
with the same elements in the same physical order, the index of one that holds the element at an
index of the other. `bitcast_map` gives it as an indexing map between two shapes; `bitcast_index`
as expressions, from a row-major shape's index expressions, matching dimensions in groups of equal
products (so unsplit dimensions keep their expressions)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from hlocc.analysis.affine_expr import Const, Expr, dim
from hlocc.analysis.indexing_map import IndexingMap
from hlocc.analysis.linearize import delinearize, linear_index
from hlocc.errors import UnsupportedError
from hlocc.hlo.types import Shape


def bitcast_map(src: Shape, dst: Shape) -> IndexingMap:
    """From an index of `src` to the index of `dst` at the same physical position (identity when
    the dimensions and layouts agree)."""
    if src.dims == dst.dims and src.minor_to_major == dst.minor_to_major:
        return IndexingMap.identity(src.dims)
    linear = linear_index(src.dims, [dim(i) for i in range(len(src.dims))], src.minor_to_major)
    return IndexingMap.from_sizes(src.dims, delinearize(linear, dst.dims, dst.minor_to_major)).simplify()


def bitcast_index(dims: Sequence[int], exprs: Sequence[Expr], shape: Shape) -> list[Expr]:
    """The logical index of `shape` holding the element that index `exprs` of a row-major shape
    `dims` holds, the two having the same elements in the same physical order (XLA's
    GetBitcastMap). Dimensions are matched in groups of equal products, so a dimension that is a
    dimension of the other shape keeps its expression, one that is split or merged gets a div/mod
    or a linear combination; size-1 dimensions are 0 (callers constrain the expressions in bounds)."""
    source = [(n, e) for n, e in zip(dims, exprs) if n != 1]
    target = [d for d in reversed(shape.minor_to_major) if shape.dims[d] != 1]
    if math.prod(n for n, _ in source) != math.prod(shape.dims[d] for d in target):
        raise UnsupportedError(f"unsupported: {shape} is not a bitcast of the transpose's shape {list(dims)}")
    out: list[Expr] = [Const(0)] * shape.rank
    i = j = 0
    while i < len(source):
        group_in, group_out = [source[i]], [target[j]]
        size_in, size_out = source[i][0], shape.dims[target[j]]
        i, j = i + 1, j + 1
        while size_in != size_out:  # equal products: each side runs out only when the sizes meet
            if size_in < size_out:
                group_in.append(source[i])
                size_in *= source[i][0]
                i += 1
            else:
                group_out.append(target[j])
                size_out *= shape.dims[target[j]]
                j += 1
        linear = group_in[0][1] if len(group_in) == 1 else linear_index(*zip(*group_in))
        for d, e in zip(group_out, delinearize(linear, [shape.dims[d] for d in group_out])):
            out[d] = e
    return out
