"""Table entries for matrix products (mm/bmm/addmm), embedding and indexing
(gather, index, index_select, scatter, index_put, slice/select_scatter), and
scaled_dot_product_attention decomposed into HLO (when a graph still holds it).

Indexing ops become HLO gather/scatter with explicit index vectors: PyTorch's per-element index
tensors (`torch.gather`, `scatter`) are stacked with iotas of the other dimensions. Out-of-range
indices are clamped by HLO gather (XLA's semantics) where PyTorch raises: a graph PyTorch runs
without error gives the same values; negative indices wrap as in PyTorch.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from hlocc.frontends.torch.ops_reduce import softmax
from hlocc.hlo.attributes import SliceDim
from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.types import primitive_type

if TYPE_CHECKING:  # (the rules' context; lowering.py imports this table)
    from hlocc.frontends.torch.lowering import LoweringContext

_S64 = primitive_type("s64")


def dot(cx: LoweringContext, a: HloInstruction, b: HloInstruction, batch: int = 0, shape=None) -> HloInstruction:
    """a @ b over `batch` leading batch dimensions (a: [..., m, k], b: [..., k, n])."""
    attrs = {"lhs_batch_dims": tuple(range(batch)), "lhs_contracting_dims": (a.shape.rank - 1,),
             "rhs_batch_dims": tuple(range(batch)), "rhs_contracting_dims": (b.shape.rank - 2,)}
    dims = list(a.shape.dims[:-1]) + [b.shape.dims[-1]]
    return cx.add("dot", [a, b], attrs, shape=shape or a.shape.with_dims(dims))


def _mm(cx: LoweringContext, a, b):
    et = cx.element_type
    return dot(cx, cx.convert(a, et), cx.convert(b, et), shape=cx.shape)


def _addmv(cx: LoweringContext, bias, matrix, vector, *, beta=1, alpha=1):
    """beta · bias + alpha · (matrix @ vector)."""
    et = cx.element_type
    product = cx.add("dot", [cx.convert(matrix, et), cx.convert(vector, et)],
                     {"lhs_batch_dims": (), "lhs_contracting_dims": (1,), "rhs_batch_dims": (),
                      "rhs_contracting_dims": (0,)}, shape=cx.shape)
    if alpha != 1:
        product = cx.add("multiply", [product, cx.full(alpha, cx.shape)])
    if beta == 0:
        return product
    bias = cx.operand(bias, et, cx.shape.dims)
    if beta != 1:
        bias = cx.add("multiply", [bias, cx.full(beta, cx.shape)])
    return cx.add("add", [bias, product])


def _bmm(cx: LoweringContext, a, b):
    et = cx.element_type
    return dot(cx, cx.convert(a, et), cx.convert(b, et), batch=1, shape=cx.shape)


def _addmm(cx: LoweringContext, bias, a, b, *, beta=1, alpha=1):
    product = _mm(cx, a, b)
    if alpha != 1:
        product = cx.add("multiply", [product, cx.full(alpha, cx.shape)])
    bias = cx.operand(bias, cx.element_type, cx.shape.dims)
    if beta != 1:
        bias = cx.add("multiply", [bias, cx.full(beta, cx.shape)])
    return cx.add("add", [bias, product]) if beta != 0 else product


# -- gather and scatter ---------------------------------------------------------------------------
def _wrapped(cx: LoweringContext, index: HloInstruction, where: tuple) -> HloInstruction:
    """`index` as s64 with negative values wrapped by the size of dimension where[1] of where[0]
    (PyTorch's negative indexing)."""
    index = cx.convert(index, "s64")
    negative = cx.add("compare", [index, cx.full(0, index.shape)], {"direction": "LT"})
    size = cx.broadcast_to(cx.size_of(where[0], [where[1]], "s64"), index.shape.dims)
    return cx.add("select", [negative, cx.add("add", [index, size]), index])


def _embedding(cx: LoweringContext, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    rank = indices.shape.rank
    return cx.add("gather", [weight, cx.convert(indices, "s64")],
                  {"offset_dims": (rank,), "collapsed_slice_dims": (0,), "start_index_map": (0,),
                   "index_vector_dim": rank, "slice_sizes": (1, weight.shape.dims[1])}, shape=cx.shape)


def _embedding_renorm(cx: LoweringContext, weight, indices, max_norm, norm_type):
    """nn.Embedding(max_norm=...)'s `embedding_renorm` (functional): every row the indices name
    whose p-norm exceeds max_norm is scaled by max_norm / (norm + 1e-7), the scale computed in f64
    from the row's norm as ATen's kernel does (`.item<double>()`)."""
    et = weight.shape.element_type.name
    rows = weight.shape.dims[0]
    flat = cx.reshape(cx.convert(indices, "s64"), [_count(indices)])
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


def _count(x) -> int:
    """The number of elements of an instruction or a shape (static)."""
    n = 1
    for d in getattr(x, "shape", x).dims:
        n *= d
    return n


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


def _index_select(cx: LoweringContext, x, dim, index):
    dim = dim + x.shape.rank if dim < 0 else dim
    index = _wrapped(cx, index, (x, dim))
    return cx.add("gather", [x, index],
                  {"offset_dims": tuple(i for i in range(x.shape.rank) if i != dim), "collapsed_slice_dims": (dim,),
                   "start_index_map": (dim,), "index_vector_dim": 1,
                   "slice_sizes": tuple(1 if i == dim else d for i, d in enumerate(x.shape.dims))}, shape=cx.shape)


def _element_indices(cx: LoweringContext, x, dim: int, index: HloInstruction) -> HloInstruction:
    """[*index.shape, rank] coordinates into x: iotas, with `index` (wrapped) along `dim`."""
    columns = []
    for d in range(index.shape.rank):
        column = _wrapped(cx, index, (x, dim)) if d == dim else cx.add(
            "iota", attrs={"iota_dimension": d}, shape=index.shape.with_element_type(_S64))
        columns.append(cx.reshape(column, list(index.shape.dims) + [1]))
    return cx.add("concatenate", columns, {"dimensions": (index.shape.rank,)}) if len(columns) > 1 else columns[0]


def _gather(cx: LoweringContext, x, dim, index, sparse_grad=False):
    dim = dim + x.shape.rank if dim < 0 else dim
    rank = x.shape.rank
    return cx.add("gather", [x, _element_indices(cx, x, dim, index)],
                  {"offset_dims": (), "collapsed_slice_dims": tuple(range(rank)), "start_index_map": tuple(range(rank)),
                   "index_vector_dim": rank, "slice_sizes": (1,) * rank}, shape=cx.shape)


def gather_along(cx: LoweringContext, x, dim: int, index: HloInstruction) -> HloInstruction:
    """torch.gather(x, dim, index) of an index of the result's own shape (not the node's: a rule
    gathering on the way to its result)."""
    rank = x.shape.rank
    return cx.add("gather", [x, _element_indices(cx, x, dim, index)],
                  {"offset_dims": (), "collapsed_slice_dims": tuple(range(rank)), "start_index_map": tuple(range(rank)),
                   "index_vector_dim": rank, "slice_sizes": (1,) * rank},
                  shape=index.shape.with_element_type(x.shape.element_type))


def _scatter_computation(cx: LoweringContext, reduce: str | None, et: str):
    return cx.lowering.reducer("assign" if reduce is None else reduce, et)


def scatter_elements(cx: LoweringContext, x, dim: int, index, src, reduce: str | None) -> HloInstruction:
    """torch.scatter: x[..., index[i...], ...] = src[i...] along `dim` (`reduce`: "add" accumulates)."""
    dim = dim + x.shape.rank if dim < 0 else dim
    rank = x.shape.rank
    src = cx.operand(src, x.shape.element_type.name, index.shape.dims)
    if tuple(src.shape.dims) != tuple(index.shape.dims):
        src = _slice_to(cx, src, index.shape.dims)
    return cx.add("scatter", [x, _element_indices(cx, x, dim, index), src],
                  {"update_window_dims": (), "inserted_window_dims": tuple(range(rank)),
                   "scatter_dims_to_operand_dims": tuple(range(rank)), "index_vector_dim": rank,
                   "to_apply": _scatter_computation(cx, reduce, x.shape.element_type.name)}, shape=x.shape)


def _scatter(reduce: str | None):
    def rule(cx: LoweringContext, x, dim, index, src, *, reduce_mode=None):
        return scatter_elements(cx, x, dim, index, src, reduce)
    return rule


_SCATTER_REDUCERS = {"sum": "add", "mean": "add", "prod": "multiply", "amax": "maximum", "amin": "minimum"}


def _scatter_reduce(cx: LoweringContext, x, dim, index, src, reduce: str, *, include_self=True):
    """torch.scatter_reduce: every src element combined into x[..., index, ...] by `reduce`. Without
    `include_self`, a position that gets an update starts from the reduction's identity instead of
    x's value (one that gets none keeps x's); "mean" divides the sum by the number of values summed."""
    et = x.shape.element_type
    if reduce == "mean" and not et.is_float:
        raise cx.error("scatter_reduce 'mean' of integers (PyTorch floors the quotient) is not lowered")
    opcode = _SCATTER_REDUCERS[reduce]
    dim = dim + x.shape.rank if dim < 0 else dim
    counts = None
    if not include_self or reduce == "mean":
        ones = cx.full(1, index.shape.with_element_type(et))
        counts = scatter_elements(cx, cx.full(0, x.shape), dim, index, ones, "add")
    if not include_self:
        touched = cx.add("compare", [counts, cx.full(0, x.shape)], {"direction": "GT"})
        if opcode in ("maximum", "minimum"):
            limits = np.finfo(et.dtype) if et.is_float else np.iinfo(et.dtype)
            identity = (-math.inf if opcode == "maximum" else math.inf) if et.is_float else (
                limits.min if opcode == "maximum" else limits.max)
        else:
            identity = 1 if opcode == "multiply" else 0
        x = cx.add("select", [touched, cx.full(identity, x.shape), x])
    result = scatter_elements(cx, x, dim, index, src, opcode)
    if reduce == "mean":
        if include_self:
            counts = cx.add("add", [counts, cx.full(1, x.shape)])
        result = cx.add("divide", [result, cx.add("maximum", [counts, cx.full(1, x.shape)])])
    return result


def _index_reduce(cx: LoweringContext, x, dim, index, source, reduce: str, *, include_self=True):
    """Tensor.index_reduce: source's slices along `dim` reduced into x's slices `index` names:
    scatter_reduce with the index spread over source's other dims."""
    dim = dim + x.shape.rank if dim < 0 else dim
    spread = cx.add("broadcast", [cx.convert(index, "s64")], {"dimensions": (dim,)},
                    shape=source.shape.with_element_type(_S64))
    return _scatter_reduce(cx, x, dim, spread, source, reduce, include_self=include_self)


def _masked_scatter(cx: LoweringContext, x, mask, source):
    """Tensor.masked_scatter: the masked positions, in row-major order, take source's elements in
    order (the k-th masked position the k-th element, k a running count of the mask)."""
    from hlocc.frontends.torch.ops_reduce import scan

    n = _count(x)
    keep = cx.reshape(cx.broadcast_to(mask, x.shape.dims), [n])
    taken = scan(cx, cx.convert(keep, "s64"), 0, cx.reducer("add", "s64"), 0)
    position = cx.add("maximum", [cx.add("subtract", [taken, cx.full(1, taken.shape)]), cx.full(0, taken.shape)])
    flat_source = cx.reshape(cx.convert(source, x.shape.element_type.name), [_count(source)])
    values = cx.add("gather", [flat_source, cx.reshape(position, [n, 1])],
                    {"offset_dims": (), "collapsed_slice_dims": (0,), "start_index_map": (0,), "index_vector_dim": 1,
                     "slice_sizes": (1,)}, shape=keep.shape.with_element_type(x.shape.element_type))
    return cx.reshape(cx.add("select", [keep, values, cx.reshape(x, [n])]), x.shape.dims)


def _masked_scatter_backward(cx: LoweringContext, grad, mask, sizes):
    """The gradient of masked_scatter's source: grad's masked elements, in row-major order, as
    source's first elements (the rest 0): the masked_scatter's gather transposed, a scatter to
    the running count's positions (unmasked ones out of range, which scatter skips)."""
    from hlocc.frontends.torch.ops_reduce import scan

    n, total = _count(grad), _count(cx.shape)
    keep = cx.reshape(cx.broadcast_to(mask, grad.shape.dims), [n])
    taken = scan(cx, cx.convert(keep, "s64"), 0, cx.reducer("add", "s64"), 0)
    position = cx.add("subtract", [taken, cx.full(1, taken.shape)])
    position = cx.add("select", [keep, position, cx.full(total, taken.shape)])
    flat = cx.add("scatter", [cx.full(0, cx.shape.with_dims([total])), cx.reshape(position, [n, 1]),
                              cx.reshape(cx.convert(grad, cx.element_type), [n])],
                  {"update_window_dims": (), "inserted_window_dims": (0,), "scatter_dims_to_operand_dims": (0,),
                   "index_vector_dim": 1, "to_apply": cx.reducer("add", cx.element_type)},
                  shape=cx.shape.with_dims([total]))
    return cx.reshape(flat, cx.shape.dims)


def _triangle_indices(lower: bool):
    """tril_indices / triu_indices: a constant (numpy's order is PyTorch's: row-major)."""
    def rule(cx: LoweringContext, row, col, offset=0, **_):
        rows, cols = (np.tril_indices if lower else np.triu_indices)(row, offset, col)
        literal = np.stack([rows, cols]).astype(cx.shape.element_type.dtype)
        return cx.add("constant", shape=cx.shape, literal=literal)
    return rule


def _dist(cx: LoweringContext, a, b, p=2):
    """torch.dist: the p-norm of a - b (broadcast) over all elements."""
    from hlocc.frontends.torch.ops_reduce import _vector_norm

    et = cx.element_type
    dims = _broadcast_dims([a.shape.dims, b.shape.dims])
    difference = cx.add("subtract", [cx.operand(a, et, dims), cx.operand(b, et, dims)])
    return _vector_norm(cx, difference, p)


def _slice_to(cx: LoweringContext, x, dims):
    from hlocc.hlo.attributes import SliceDim

    return cx.add("slice", [x], {"slice": tuple(SliceDim(0, d, 1) for d in dims)}, shape=x.shape.with_dims(dims))


def _advanced_index(cx: LoweringContext, x, indices):
    """Index tensors (None for `:`) as one [B..., k] index array with its layout facts:
    (stacked indices, first indexed dim, k, len(B)). Non-None indices must be adjacent."""
    positions = [i for i, t in enumerate(indices) if t is not None]
    if positions != list(range(positions[0], positions[-1] + 1)):
        raise cx.error("indexing with non-adjacent index tensors is not lowered")
    if any(t.shape.element_type.name == "pred" for t in indices if t is not None):
        raise cx.error("indexing with a boolean mask has a data-dependent shape; not lowered")
    first, k = positions[0], len(positions)
    tensors = [indices[p] for p in positions]
    batch = _broadcast_dims([t.shape.dims for t in tensors])
    columns = [cx.reshape(cx.broadcast_to(_wrapped(cx, t, (x, p)), batch), list(batch) + [1])
               for t, p in zip(tensors, positions)]
    stacked = columns[0] if k == 1 else cx.add("concatenate", columns, {"dimensions": (len(batch),)})
    return stacked, first, k, len(batch)


def _broadcast_dims(shapes) -> tuple:
    rank = max(len(s) for s in shapes)
    dims = [1] * rank
    for s in shapes:
        for i, d in enumerate(s):
            j = rank - len(s) + i
            if d != 1:
                dims[j] = d
    return tuple(dims)


def _index(cx: LoweringContext, x, indices):
    indices = list(indices) + [None] * (x.shape.rank - len(indices))
    stacked, first, k, nb = _advanced_index(cx, x, indices)
    offset = tuple(range(first)) + tuple(range(first + nb, first + nb + x.shape.rank - first - k))
    sizes = tuple(1 if first <= i < first + k else d for i, d in enumerate(x.shape.dims))
    indexed = tuple(range(first, first + k))
    return cx.add("gather", [x, stacked], {"offset_dims": offset, "collapsed_slice_dims": indexed,
                                           "start_index_map": indexed, "index_vector_dim": nb,
                                           "slice_sizes": sizes}, shape=cx.shape)


def _index_put(cx: LoweringContext, x, indices, values, accumulate=False):
    indices = list(indices) + [None] * (x.shape.rank - len(indices))
    stacked, first, k, nb = _advanced_index(cx, x, indices)
    batch = stacked.shape.dims[:nb]
    update_dims = list(x.shape.dims[:first]) + list(batch) + list(x.shape.dims[first + k:])
    updates = cx.operand(values, x.shape.element_type.name, update_dims)
    window = tuple(range(first)) + tuple(range(first + nb, len(update_dims)))
    return cx.add("scatter", [x, stacked, updates],
                  {"update_window_dims": window, "inserted_window_dims": tuple(range(first, first + k)),
                   "scatter_dims_to_operand_dims": tuple(range(first, first + k)), "index_vector_dim": nb,
                   "to_apply": _scatter_computation(cx, "add" if accumulate else None, x.shape.element_type.name)},
                  shape=cx.shape)


def _update_slice(cx: LoweringContext, x, src, dim, start):
    starts = [cx.constant(start if i == dim else 0, "s64") for i in range(x.shape.rank)]
    return cx.add("dynamic-update-slice", [x, cx.convert(src, x.shape.element_type.name)] + starts, shape=cx.shape)


def _slice_scatter(cx: LoweringContext, x, src, dim=0, start=None, end=None, step=1):
    dim = dim + x.shape.rank if dim < 0 else dim
    start = 0 if start is None else start
    if isinstance(start, int) and start < 0:
        start += x.shape.dims[dim]
    if step != 1:
        return _strided_slice_scatter(cx, x, src, dim, start, step)
    return _update_slice(cx, x, src, dim, start)


def _strided_slice_scatter(cx: LoweringContext, x, src, dim: int, start, step: int):
    """x with src written at start, start + step, ... along `dim` (the backward of a strided slice,
    `t[..., 1::2]` of a rotary embedding): src spread by step - 1 interior zeros and padded to x's
    size, chosen where the position is one of the slice's. Elementwise, so it fuses."""
    n, m = x.shape.dims[dim], src.shape.dims[dim]
    if not all(isinstance(v, int) for v in (n, m, start)):
        raise cx.error("slice_scatter with a step over symbolic sizes is not lowered")
    from hlocc.hlo.attributes import PadDim

    src = cx.convert(src, x.shape.element_type.name)
    if m == 0:
        return x
    pads = [PadDim(0, 0)] * x.shape.rank
    pads[dim] = PadDim(start, n - (start + step * (m - 1) + 1), step - 1)
    spread = cx.add("pad", [src, cx.constant(0, x.shape.element_type.name)], {"padding": tuple(pads)}, shape=x.shape)
    chosen = np.zeros(n, dtype=bool)
    chosen[start:start + step * (m - 1) + 1:step] = True
    literal = cx.add("constant", shape=x.shape.with_dims([n]).with_element_type(primitive_type("pred")),
                     literal=chosen)
    mask = cx.add("broadcast", [literal], {"dimensions": (dim,)}, shape=x.shape.with_element_type(
        primitive_type("pred")))
    return cx.add("select", [mask, spread, x], shape=cx.shape)


def _select_scatter(cx: LoweringContext, x, src, dim, index):
    dim = dim + x.shape.rank if dim < 0 else dim
    if isinstance(index, int) and index < 0:
        index += x.shape.dims[dim]
    src = cx.reshape(src, [1 if i == dim else d for i, d in enumerate(x.shape.dims)])
    return _update_slice(cx, x, src, dim, index)


# -- embedding_bag ----------------------------------------------------------------------------------
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


def _embedding_rows(cx: LoweringContext, weight, indices):
    return cx.add("gather", [weight, cx.reshape(cx.convert(indices, "s64"), [indices.shape.dims[0], 1])],
                  {"offset_dims": (1,), "collapsed_slice_dims": (0,), "start_index_map": (0,), "index_vector_dim": 1,
                   "slice_sizes": (1, weight.shape.dims[1])},
                  shape=weight.shape.with_dims([indices.shape.dims[0], weight.shape.dims[1]]))


def _gather_rows(cx: LoweringContext, table, rows):
    return _embedding_rows(cx, table, rows)


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


# -- searchsorted ---------------------------------------------------------------------------------
def _common_type(cx: LoweringContext, a, b) -> str:
    """PyTorch's result type of the node's arguments `a` and `b` (tensors by their FakeTensors,
    Python numbers as they are): searchsorted compares in it."""
    import torch

    from hlocc.frontends.torch.types import element_type

    def example(arg):
        return arg.meta["val"] if type(arg).__name__ == "Node" else arg
    return element_type(torch.result_type(example(a), example(b)))


def _search(cx: LoweringContext, boundaries, values, *, right: bool, sorter=None, common: str) -> HloInstruction:
    """The insertion points of `values` into the last dimension of `boundaries` (1-D, or one row per
    leading index of `values`) by ATen's own binary search (`cus_lower_bound` / `cus_upper_bound`):
    while start < end, mid = start + (end - start) / 2, go right when !(row[mid] >= v) (right=True:
    !(row[mid] > v)). Its ceil(log2(n + 1)) steps are unrolled, all values stepping together (a
    finished one keeps its start). The search itself rather than a count of the elements below v
    (a compare and a sum): the count is the same on a sorted row without NaN, the search is
    PyTorch's answer on any row (NaNs, which torch.sort puts last, compare false both ways and so
    send the search right, and unsorted rows) in O(log n) per value (a symbolic n: 32 steps and a
    guard that n < 2**32). `sorter` (argsort of the rows)
    reorders the rows first, as the kernel reads row[sorter[mid]]."""
    boundaries = cx.convert(boundaries, common)
    values = cx.convert(values if isinstance(values, HloInstruction) else cx.constant(values, common), common)
    n = boundaries.shape.dims[-1]
    steps = n.bit_length() if isinstance(n, int) else _SYMBOLIC_SEARCH_STEPS
    if not isinstance(n, int):  # (steps enough for any n the guard lets through)
        from hlocc.hlo.guards import ShapeGuard, SizeComparison, SizePredicate

        cx.lowering.module.guards.append(ShapeGuard(
            SizePredicate((SizeComparison("LT", n, 2**_SYMBOLIC_SEARCH_STEPS),)),
            f"{cx.where()}: searchsorted into {{0}} boundaries (at most 2**{_SYMBOLIC_SEARCH_STEPS} - 1)", (n,)))
    per_row = boundaries.shape.rank > 1
    if sorter is not None:
        boundaries = gather_along(cx, boundaries, boundaries.shape.rank - 1, sorter)
    index_shape = values.shape.with_element_type(_S64)
    count = cx.broadcast_to(cx.size_of(boundaries, [boundaries.shape.rank - 1], "s64"), index_shape.dims)
    last = cx.add("maximum", [cx.add("subtract", [count, cx.full(1, index_shape)]), cx.full(0, index_shape)])
    start, end = cx.full(0, index_shape), count
    for _ in range(steps):
        active = cx.add("compare", [start, end], {"direction": "LT"})
        mid = cx.add("add", [start, cx.add("shift-right-logical", [cx.add("subtract", [end, start]),
                                                                    cx.full(1, index_shape)])])
        probe = cx.add("minimum", [mid, last])  # (a finished search's mid may be n)
        if per_row:
            found = gather_along(cx, boundaries, values.shape.rank - 1, probe)
        else:
            found = cx.add("gather", [boundaries, probe],
                           {"offset_dims": (), "collapsed_slice_dims": (0,), "start_index_map": (0,),
                            "index_vector_dim": probe.shape.rank, "slice_sizes": (1,)},
                           shape=values.shape)
        stays = cx.add("compare", [found, values], {"direction": "GT" if right else "GE"})
        go_right = cx.add("and", [active, cx.add("not", [stays])])
        go_left = cx.add("and", [active, stays])
        start = cx.add("select", [go_right, cx.add("add", [mid, cx.full(1, index_shape)]), start])
        end = cx.add("select", [go_left, mid, end])
    return start


_SYMBOLIC_SEARCH_STEPS = 32
"""The binary search's unrolled steps where the number of boundaries is symbolic (a guard keeps it
below 2**32; a static count takes its own bit length)."""


def _searchsorted(cx: LoweringContext, boundaries, values, *, out_int32=False, right=False, side=None, sorter=None):
    """torch.searchsorted (a tensor or a Python number of values): `_search` in the arguments'
    common type, s32 with out_int32; side="right" is right=True."""
    common = _common_type(cx, cx.node.args[0], cx.node.args[1])
    found = _search(cx, boundaries, values, right=bool(right) or side == "right", sorter=sorter, common=common)
    return cx.convert(found, cx.element_type)


def _bucketize(cx: LoweringContext, values, boundaries, *, out_int32=False, right=False):
    """torch.bucketize: searchsorted into 1-D boundaries with the arguments the other way round."""
    common = _common_type(cx, cx.node.args[0], cx.node.args[1])
    return cx.convert(_search(cx, boundaries, values, right=bool(right), common=common), cx.element_type)


# -- attention ------------------------------------------------------------------------------------
def _sdpa(cx: LoweringContext, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None,
          enable_gqa=False):
    """softmax(q kᵀ · scale + mask) v, with the causal mask from iotas (row ≥ column)."""
    if dropout_p:
        raise cx.error("attention dropout draws random numbers; not lowered")
    et = cx.element_type
    batch = q.shape.rank - 2
    scale = 1 / math.sqrt(q.shape.dims[-1]) if scale is None else scale
    perm = tuple(range(batch)) + (batch + 1, batch)
    kt = cx.add("transpose", [k], {"dimensions": perm}, shape=k.shape.with_dims([k.shape.dims[i] for i in perm]))
    scores = dot(cx, q, kt, batch)
    scores = cx.add("multiply", [scores, cx.full(scale, scores.shape)])
    if is_causal:
        rows = cx.add("iota", attrs={"iota_dimension": batch}, shape=scores.shape.with_element_type(_S64))
        cols = cx.add("iota", attrs={"iota_dimension": batch + 1}, shape=scores.shape.with_element_type(_S64))
        keep = cx.add("compare", [rows, cols], {"direction": "GE"})
        scores = cx.add("select", [keep, scores, cx.full(-math.inf, scores.shape)])
    if attn_mask is not None:
        if attn_mask.shape.element_type.name == "pred":
            keep = cx.broadcast_to(attn_mask, scores.shape.dims)
            scores = cx.add("select", [keep, scores, cx.full(-math.inf, scores.shape)])
        else:
            scores = cx.add("add", [scores, cx.operand(attn_mask, et, scores.shape.dims)])
    weights = softmax(cx, scores, -1)
    return [dot(cx, weights, v, batch, shape=cx.shape)] if isinstance(cx.val, (tuple, list)) else \
        dot(cx, weights, v, batch, shape=cx.shape)


RANDOM = ("rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "bernoulli", "native_dropout",
          "normal", "uniform", "multinomial", "randperm", "exponential", "poisson", "dropout")
"""Ops that draw random numbers: refused, since hlocc cannot reproduce PyTorch's generator stream
(the graph runs eager, so `torch.manual_seed` keeps its meaning)."""

OPS = {
    "aten.mm.default": _mm, "aten.bmm.default": _bmm, "aten.addmm.default": _addmm, "aten.addmv.default": _addmv,
    "aten.index_reduce.default": _index_reduce, "aten.masked_scatter.default": _masked_scatter,
    "aten.masked_scatter_backward.default": _masked_scatter_backward,
    "aten.tril_indices.default": _triangle_indices(True), "aten.triu_indices.default": _triangle_indices(False),
    "aten.dist.default": _dist,
    "aten.embedding.default": _embedding, "aten.index_select.default": _index_select,
    "aten.embedding_renorm.default": _embedding_renorm,
    "aten.gather.default": _gather, "aten.index.Tensor": _index, "aten.index_put.default": _index_put,
    "aten.scatter.src": _scatter(None), "aten.scatter.value": _scatter(None),
    "aten.scatter_add.default": _scatter("add"), "aten.scatter_reduce.two": _scatter_reduce,
    "aten.slice_scatter.default": _slice_scatter, "aten.select_scatter.default": _select_scatter,
    "aten.scaled_dot_product_attention.default": _sdpa,
    "aten._embedding_bag.default": _embedding_bag, "aten._embedding_bag_forward_only.default": _embedding_bag,
    "aten._embedding_bag_backward.default": _embedding_bag_backward,
    "aten._embedding_bag_per_sample_weights_backward.default": _embedding_bag_sample_weights_backward,
    "aten.searchsorted.Tensor": _searchsorted, "aten.searchsorted.Scalar": _searchsorted,
    "aten.bucketize.Tensor": _bucketize, "aten.bucketize.Scalar": _bucketize,
}
