"""Table entries for embeddings: `embedding` (a gather of rows), `embedding_renorm`
(nn.Embedding(max_norm=...)) and nn.EmbeddingBag's `_embedding_bag` with its backward passes
(rows gathered, weighted and scattered into their bags)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from hlocc.frontends.torch.ops_shape import check_index_range, element_count
from hlocc.hlo.attributes import SliceDim
from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.types import primitive_type

if TYPE_CHECKING:  # (the rules' context; lowering.py imports this table)
    from hlocc.frontends.torch.lowering import LoweringContext

_S64 = primitive_type("s64")


def _embedding(cx: LoweringContext, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    rank = indices.shape.rank
    return cx.add("gather", [weight, _checked_rows(cx, weight, indices)],
                  {"offset_dims": (rank,), "collapsed_slice_dims": (0,), "start_index_map": (0,),
                   "index_vector_dim": rank, "slice_sizes": (1, weight.shape.dims[1])}, shape=cx.shape)


def _embedding_renorm(cx: LoweringContext, weight, indices, max_norm, norm_type):
    """nn.Embedding(max_norm=...)'s `embedding_renorm` (functional): every row the indices name
    whose p-norm exceeds max_norm is scaled by max_norm / (norm + 1e-7), the scale computed in f64
    from the row's norm as ATen's kernel does (`.item<double>()`)."""
    et = weight.shape.element_type.name
    rows = weight.shape.dims[0]
    flat = cx.reshape(cx.convert(indices, "s64"), [element_count(indices)])
    named = cx.add("scatter", [cx.full(False, weight.shape.with_dims([rows]).with_element_type(primitive_type("pred"))),
                               cx.reshape(flat, [flat.shape.dims[0], 1]),
                               cx.full(True, flat.shape.with_element_type(primitive_type("pred")))],
                   {"update_window_dims": (), "inserted_window_dims": (0,), "scatter_dims_to_operand_dims": (0,),
                    "index_vector_dim": 1, "to_apply": cx.reducer("assign", "pred")},
                   shape=weight.shape.with_dims([rows]).with_element_type(primitive_type("pred")))
    norms = cx.convert(_row_norms(cx, weight, norm_type), "f64")
    over = cx.add("and", [named, cx.add("compare", [norms, cx.full(max_norm, norms.shape)], {"direction": "GT"})])
    scale = cx.add("divide", [cx.full(max_norm, norms.shape), cx.add("add", [norms, cx.full(1e-7, norms.shape)])])
    scale = cx.convert(cx.add("select", [over, scale, cx.full(1, norms.shape)]), et)
    return cx.add("multiply", [weight, cx.add("broadcast", [scale], {"dimensions": (0,)}, shape=weight.shape)],
                  shape=cx.shape)


def _row_norms(cx: LoweringContext, weight, p):
    """The p-norm of each row of a 2-D weight, in its type (p = inf: max |w|)."""
    from hlocc.frontends.torch.ops_reduce import reduce

    magnitude = cx.add("abs", [weight])
    if p == math.inf:
        return reduce(cx, magnitude, [1], "maximum")
    if p == 2:
        return cx.add("sqrt", [reduce(cx, cx.add("multiply", [magnitude, magnitude]), [1], "add")])
    if p == 1:
        return reduce(cx, magnitude, [1], "add")
    total = reduce(cx, cx.add("power", [magnitude, cx.full(p, magnitude.shape)]), [1], "add")
    return cx.add("power", [total, cx.full(1 / p, total.shape)])


def _bags(cx: LoweringContext, indices, offsets, bags: int, padding_idx) -> tuple:
    """(the s64 bag of every index position, whether it counts) of `_embedding_bag`'s flat indices:
    position n is in the last bag whose offset is <= n; with include_last_offset (one offset more
    than bags) positions from the last offset on are in none; an index equal to padding_idx (>= 0)
    does not count."""
    n = indices.shape.dims[0]
    offsets = cx.convert(offsets, "s64")
    firsts = slice_to_length(cx, offsets, bags)
    grid = indices.shape.with_dims([n, bags]).with_element_type(_S64)
    position = cx.add("iota", attrs={"iota_dimension": 0}, shape=grid)
    started = cx.add("compare", [cx.add("broadcast", [firsts], {"dimensions": (1,)}, shape=grid), position],
                     {"direction": "LE"})
    from hlocc.frontends.torch.ops_reduce import reduce

    bag = cx.add("subtract", [reduce(cx, cx.convert(started, "s64"), [1], "add"), cx.full(1, indices.shape.with_dims(
        [n]).with_element_type(_S64))])
    counts = cx.add("compare", [bag, cx.full(0, bag.shape)], {"direction": "GE"})
    if offsets.shape.dims[0] > bags:  # include_last_offset
        last = cx.add("slice", [offsets], {"slice": (SliceDim(bags, bags + 1, 1),)}, shape=offsets.shape.with_dims([1]))
        inside = cx.add("compare", [cx.add("iota", attrs={"iota_dimension": 0}, shape=bag.shape),
                                    cx.broadcast_to(cx.reshape(last, []), [n])], {"direction": "LT"})
        counts = cx.add("and", [counts, inside])
    if padding_idx is not None and padding_idx >= 0:
        counts = cx.add("and", [counts, cx.add("compare", [cx.convert(indices, "s64"), cx.full(padding_idx, bag.shape)],
                                               {"direction": "NE"})])
    return bag, counts


def slice_to_length(cx: LoweringContext, x, length: int):
    return x if x.shape.dims[0] == length else cx.add(
        "slice", [x], {"slice": (SliceDim(0, length, 1),)}, shape=x.shape.with_dims([length]))


def _rows_to_bags(cx: LoweringContext, rows, bag, counts, bags: int, opcode: str, init):
    """Scatter-`opcode` of rows [N, D] into [bags, D] by `bag` (positions that do not count go to an
    out-of-range bag: XLA's scatter skips them)."""
    target = cx.add("select", [counts, bag, cx.full(bags, bag.shape)])
    out_shape = rows.shape.with_dims([bags, rows.shape.dims[1]])
    et = rows.shape.element_type.name
    return cx.add("scatter", [cx.full(init, out_shape), cx.reshape(target, [target.shape.dims[0], 1]), rows],
                  {"update_window_dims": (1,), "inserted_window_dims": (0,), "scatter_dims_to_operand_dims": (0,),
                   "index_vector_dim": 1, "to_apply": cx.reducer(opcode, et)}, shape=out_shape)


def _embedding_bag(cx: LoweringContext, weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                   per_sample_weights=None, include_last_offset=False, padding_idx=-1):
    """`_embedding_bag` (nn.EmbeddingBag): (output, offset2bag, bag_size, max_indices) in the sizes
    PyTorch's meta function gives them. Rows gathered, weighted (per_sample_weights, sum mode) and
    scattered into their bags: sum; mean divides by the bag's size (an empty bag gives 0); max
    keeps the per-column max and, as ATen's CPU kernel, the index of the first row that reaches it
    (empty bags: 0). Indices equal to padding_idx do not count. `offset2bag` is each position's bag
    and `bag_size` the counted positions, which the backward reads. (A NaN in max mode: HLO's max
    propagates it; ATen's kernel keeps a NaN only as a bag's first row.)"""
    shapes = cx.shapes()
    bags = shapes[0].dims[0]
    n, width = indices.shape.dims[0], weight.shape.dims[1]
    et = weight.shape.element_type.name
    bag, counts = _bags(cx, indices, offsets, bags, padding_idx)
    rows = _embedding_rows(cx, weight, indices)
    sizes = _rows_to_bags(cx, cx.reshape(cx.convert(counts, "s64"), [n, 1]), bag, counts, bags, "add", 0)
    sizes = cx.reshape(sizes, [bags])
    empty = cx.add("compare", [sizes, cx.full(0, sizes.shape)], {"direction": "EQ"})
    empty_rows = cx.add("broadcast", [empty], {"dimensions": (0,)}, shape=shapes[0].with_element_type(
        primitive_type("pred")))
    max_index = None
    if mode == 2:
        out = _rows_to_bags(cx, rows, bag, counts, bags, "maximum", -math.inf)
        reached = cx.add("compare", [rows, _gather_rows(cx, out, cx.add("minimum", [bag, cx.full(
            bags - 1, bag.shape)]))], {"direction": "EQ"})
        position = cx.add("iota", attrs={"iota_dimension": 0}, shape=rows.shape.with_element_type(_S64))
        position = cx.add("select", [reached, position, cx.full(n, position.shape)])
        first = _rows_to_bags(cx, position, bag, counts, bags, "minimum", n)
        index_row = cx.add("gather", [cx.convert(indices, "s64"), cx.reshape(cx.add("minimum", [
            first, cx.full(max(n - 1, 0), first.shape)]), [bags, width, 1])],
            {"offset_dims": (), "collapsed_slice_dims": (0,), "start_index_map": (0,), "index_vector_dim": 2,
             "slice_sizes": (1,)}, shape=first.shape)
        max_index = cx.add("select", [empty_rows, cx.full(0, index_row.shape), index_row])
        out = cx.add("select", [empty_rows, cx.full(0, out.shape), out])
    else:
        if per_sample_weights is not None:
            scale = cx.add("broadcast", [cx.convert(per_sample_weights, et)], {"dimensions": (0,)}, shape=rows.shape)
            rows = cx.add("multiply", [rows, scale])
        out = _rows_to_bags(cx, rows, bag, counts, bags, "add", 0)
        if mode == 1:
            divisor = cx.convert(cx.add("maximum", [sizes, cx.full(1, sizes.shape)]), et)
            out = cx.add("divide", [out, cx.add("broadcast", [divisor], {"dimensions": (0,)}, shape=out.shape)])
    results = [out]
    for shape, value in zip(shapes[1:], (bag, sizes, max_index)):
        if value is None or tuple(shape.dims) != tuple(value.shape.dims):
            value = cx.full(0, shape)  # (an empty offset2bag, an unused max_indices: as PyTorch sizes them)
        results.append(cx.convert(value, shape.element_type.name))
    return results


def _checked_rows(cx: LoweringContext, weight, indices) -> HloInstruction:
    """`indices` as s64, checked to name rows of `weight` (eager: "index out of range in self")."""
    indices = cx.convert(indices, "s64")
    check_index_range(cx, indices, cx.constant(0, "s64"), cx.size_of(weight, [0], "s64"), "index out of range in self")
    return indices


def _embedding_rows(cx: LoweringContext, weight, indices):
    return _gather_rows(cx, weight, _checked_rows(cx, weight, indices))


def _gather_rows(cx: LoweringContext, table, rows):
    """The rows of `table` that `rows` (in range) name."""
    return cx.add("gather", [table, cx.reshape(cx.convert(rows, "s64"), [rows.shape.dims[0], 1])],
                  {"offset_dims": (1,), "collapsed_slice_dims": (0,), "start_index_map": (0,), "index_vector_dim": 1,
                   "slice_sizes": (1, table.shape.dims[1])},
                  shape=table.shape.with_dims([rows.shape.dims[0], table.shape.dims[1]]))


def _embedding_bag_backward(cx: LoweringContext, grad, indices, offsets, offset2bag, bag_size, maximum_indices,
                            num_weights, scale_grad_by_freq, mode, sparse, per_sample_weights, padding_idx=-1):
    """The dense gradient of the weight: each counted position's row gets its bag's gradient (times
    its per_sample_weight; divided by the bag's size for mean); max mode sends each bag's gradient
    to the rows `maximum_indices` chose. The bags are recomputed from the offsets (offset2bag is
    empty with include_last_offset)."""
    if sparse or scale_grad_by_freq:
        raise cx.error("embedding_bag's sparse or scale_grad_by_freq gradient is not lowered")
    bags, width = grad.shape.dims
    et = cx.element_type
    zeros = cx.full(0, cx.shape)
    if mode == 2:
        sizes = cx.convert(bag_size, "s64")
        full = cx.add("compare", [sizes, cx.full(0, sizes.shape)], {"direction": "GT"})
        full = cx.add("broadcast", [full], {"dimensions": (0,)}, shape=grad.shape.with_element_type(
            primitive_type("pred")))
        nowhere = cx.full(num_weights, grad.shape.with_element_type(_S64))  # (out of range: skipped)
        rows = cx.add("select", [full, cx.convert(maximum_indices, "s64"), nowhere])
        columns = cx.add("iota", attrs={"iota_dimension": 1}, shape=rows.shape)
        coordinates = cx.add("concatenate", [cx.reshape(rows, [bags, width, 1]), cx.reshape(columns, [bags, width, 1])],
                             {"dimensions": (2,)})
        return cx.add("scatter", [zeros, coordinates, cx.convert(grad, et)],
                      {"update_window_dims": (), "inserted_window_dims": (0, 1), "scatter_dims_to_operand_dims": (0, 1),
                       "index_vector_dim": 2, "to_apply": cx.reducer("add", et)}, shape=cx.shape)
    bag, counts = _bags(cx, indices, offsets, bags, padding_idx)
    share = cx.convert(grad, et)
    if mode == 1:
        sizes = cx.convert(bag_size, "s64")
        divisor = cx.convert(cx.add("maximum", [sizes, cx.full(1, sizes.shape)]), et)
        share = cx.add("divide", [share, cx.add("broadcast", [divisor], {"dimensions": (0,)}, shape=share.shape)])
    rows = _gather_rows(cx, share, cx.add("minimum", [cx.add("maximum", [bag, cx.full(0, bag.shape)]),
                                                      cx.full(bags - 1, bag.shape)]))
    if per_sample_weights is not None:
        rows = cx.add("multiply", [rows, cx.add("broadcast", [cx.convert(per_sample_weights, et)], {"dimensions": (0,)},
                                                shape=rows.shape)])
    target = cx.add("select", [counts, cx.convert(indices, "s64"), cx.full(num_weights, bag.shape)])
    return cx.add("scatter", [zeros, cx.reshape(target, [target.shape.dims[0], 1]), rows],
                  {"update_window_dims": (1,), "inserted_window_dims": (0,), "scatter_dims_to_operand_dims": (0,),
                   "index_vector_dim": 1, "to_apply": cx.reducer("add", et)}, shape=cx.shape)


def _embedding_bag_sample_weights_backward(cx: LoweringContext, grad, weight, indices, offsets, offset2bag, mode,
                                           padding_idx=-1):
    """The gradient of per_sample_weights (sum mode): each position's row · its bag's gradient
    (0 where it does not count)."""
    bags = grad.shape.dims[0]
    bag, counts = _bags(cx, indices, offsets, bags, padding_idx)
    et = cx.element_type
    rows = cx.convert(_embedding_rows(cx, weight, indices), et)
    grads = _gather_rows(cx, cx.convert(grad, et), cx.add("minimum", [cx.add("maximum", [bag, cx.full(0, bag.shape)]),
                                                                      cx.full(bags - 1, bag.shape)]))
    from hlocc.frontends.torch.ops_reduce import reduce

    dots = reduce(cx, cx.add("multiply", [rows, grads]), [1], "add")
    return cx.add("select", [counts, dots, cx.full(0, dots.shape)], shape=cx.shape)


OPS = {
    "aten.embedding.default": _embedding,
    "aten.embedding_renorm.default": _embedding_renorm,
    "aten._embedding_bag.default": _embedding_bag,
    "aten._embedding_bag_forward_only.default": _embedding_bag,
    "aten._embedding_bag_backward.default": _embedding_bag_backward,
    "aten._embedding_bag_per_sample_weights_backward.default": _embedding_bag_sample_weights_backward,
}
