"""`gather-simplifier`: rewrite gathers into XLA's canonical gather (GatherSimplifier), the one
form the gather emitter handles:

    gather(operand[r dims], indices[N, K]), index_vector_dim=1, offset_dims={1..r},
           collapsed_slice_dims={}, slice_sizes=S      →  [N, S...]

surrounded by cheap data movement: the indices get their index vector dimension moved last
(a transpose, or a reshape adding the implicit size-1 vector) and their batch dimensions
flattened into N; the result is reshaped to drop the collapsed (size-1) slice dimensions and to
unflatten N, then transposed so the offset dimensions sit where `offset_dims` puts them. Each
output element reads the same operand element as before (same start indices, same clamping).
A gather with a zero slice size becomes a broadcast of 0 (it reads nothing), one of a scalar
operand a broadcast of it. Gathers with batching dimensions or dynamic shapes are left alone.
"""

from __future__ import annotations

from math import prod

import numpy as np

from hlocc.hlo.ir import HloComputation, HloInstruction, HloModule
from hlocc.hlo.types import Shape
from hlocc.passes.base import HloPass, register_hlo_pass
from hlocc.passes.dce import replace_outside_fusions


def is_simplified(gather: HloInstruction) -> bool:
    indices = gather.operands[1]
    rank = gather.operands[0].shape.rank
    return (indices.shape.rank == 2 and gather.attrs["index_vector_dim"] == 1
            and not gather.attrs["collapsed_slice_dims"] and rank > 0
            and tuple(gather.attrs["offset_dims"]) == tuple(range(1, rank + 1)))


def _simplifiable(gather: HloInstruction) -> bool:
    shapes = [gather.shape, *(o.shape for o in gather.operands)]
    return (all(s.is_array and s.is_static for s in shapes) and not gather.attrs.get("operand_batching_dims")
            and not gather.attrs.get("start_indices_batching_dims") and not is_simplified(gather))


def _indices_as_matrix(comp: HloComputation, indices: HloInstruction, vector_dim: int) -> HloInstruction:
    """`indices` as [N, K]: the index vector dimension last, the batch dimensions flattened."""
    dims = indices.shape.dims
    if vector_dim == len(dims):  # the index vector is implicit, of size 1
        batch, k = dims, 1
    else:
        batch, k = dims[:vector_dim] + dims[vector_dim + 1:], dims[vector_dim]
        if vector_dim != len(dims) - 1:
            perm = tuple(d for d in range(len(dims)) if d != vector_dim) + (vector_dim,)
            indices = comp.add("transpose", [indices], {"dimensions": perm})
    target = (prod(batch), k)
    if indices.shape.dims != target:
        indices = comp.add("reshape", [indices], shape=Shape.array(indices.shape.element_type, target))
    return indices


def simplify_gather(gather: HloInstruction) -> HloInstruction:
    """The canonical-gather replacement of `gather` (see the module docstring)."""
    comp = gather.parent
    operand, indices = gather.operands
    attrs = gather.attrs
    et = gather.shape.element_type
    sizes = tuple(attrs["slice_sizes"])
    if 0 in sizes or operand.shape.rank == 0:
        scalar = operand if operand.shape.rank == 0 else comp.add(
            "constant", (), shape=Shape.array(et, ()), literal=np.zeros((), dtype=gather.shape.dtype))
        return comp.add("broadcast", [scalar], {"dimensions": ()}, shape=gather.shape)
    vector_dim = attrs["index_vector_dim"]
    matrix = _indices_as_matrix(comp, indices, vector_dim)
    canonical_attrs = {"offset_dims": tuple(range(1, operand.shape.rank + 1)), "collapsed_slice_dims": (),
                       "start_index_map": tuple(attrs["start_index_map"]), "index_vector_dim": 1,
                       "slice_sizes": sizes}
    if "indices_are_sorted" in attrs:
        canonical_attrs["indices_are_sorted"] = attrs["indices_are_sorted"]
    result = comp.add("gather", [operand, matrix], canonical_attrs,
                      shape=Shape.array(et, (matrix.shape.dims[0],) + sizes))
    # [N, S...] → [batch..., offset sizes...] (collapsed sizes are 1) → offset dims in place
    batch = tuple(d for i, d in enumerate(indices.shape.dims) if i != vector_dim)
    offsets = tuple(s for d, s in enumerate(sizes) if d not in attrs["collapsed_slice_dims"])
    grouped = batch + offsets
    if result.shape.dims != grouped:
        result = comp.add("reshape", [result], shape=Shape.array(et, grouped))
    offset_dims = set(attrs["offset_dims"])
    perm, next_batch, next_offset = [], 0, len(batch)
    for i in range(gather.shape.rank):
        if i in offset_dims:
            perm.append(next_offset)
            next_offset += 1
        else:
            perm.append(next_batch)
            next_batch += 1
    if perm != sorted(perm):
        result = comp.add("transpose", [result], {"dimensions": tuple(perm)})
    return result


@register_hlo_pass
class GatherSimplifier(HloPass):
    """Rewrites gathers into canonical gathers."""

    name = "gather-simplifier"

    def run(self, module: HloModule) -> bool:
        def rewrite(gather: HloInstruction) -> HloInstruction | None:
            if not _simplifiable(gather):
                return None
            replacement = simplify_gather(gather)
            replacement.shape = gather.shape
            return replacement
        return replace_outside_fusions(module, "gather", rewrite)
