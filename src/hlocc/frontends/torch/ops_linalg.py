"""Table entries for matrix products (mm/bmm/addmm), indexing
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
from hlocc.frontends.torch.ops_shape import checked_index, element_count, element_indices, gather_along, wrapped_index
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


def _index_select(cx: LoweringContext, x, dim, index):
    dim = dim + x.shape.rank if dim < 0 else dim
    index = checked_index(cx, index, (x, dim))
    return cx.add("gather", [x, index],
                  {"offset_dims": tuple(i for i in range(x.shape.rank) if i != dim), "collapsed_slice_dims": (dim,),
                   "start_index_map": (dim,), "index_vector_dim": 1,
                   "slice_sizes": tuple(1 if i == dim else d for i, d in enumerate(x.shape.dims))}, shape=cx.shape)


def _gather(cx: LoweringContext, x, dim, index, sparse_grad=False):
    dim = dim + x.shape.rank if dim < 0 else dim
    rank = x.shape.rank
    return cx.add("gather", [x, element_indices(cx, x, dim, index)],
                  {"offset_dims": (), "collapsed_slice_dims": tuple(range(rank)), "start_index_map": tuple(range(rank)),
                   "index_vector_dim": rank, "slice_sizes": (1,) * rank}, shape=cx.shape)


def _scatter_computation(cx: LoweringContext, reduce: str | None, et: str):
    return cx.lowering.reducer("assign" if reduce is None else reduce, et)


def scatter_elements(cx: LoweringContext, x, dim: int, index, src, reduce: str | None,
                     check: bool = True) -> HloInstruction:
    """torch.scatter: x[..., index[i...], ...] = src[i...] along `dim` (`reduce`: "add" accumulates;
    `check`: the index is the user's, checked as eager checks it, not one a rule made in range)."""
    dim = dim + x.shape.rank if dim < 0 else dim
    rank = x.shape.rank
    src = cx.operand(src, x.shape.element_type.name, index.shape.dims)
    if tuple(src.shape.dims) != tuple(index.shape.dims):
        src = _slice_to(cx, src, index.shape.dims)
    return cx.add("scatter", [x, element_indices(cx, x, dim, index, check), src],
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

    n = element_count(x)
    keep = cx.reshape(cx.broadcast_to(mask, x.shape.dims), [n])
    taken = scan(cx, cx.convert(keep, "s64"), 0, cx.reducer("add", "s64"), 0)
    position = cx.add("maximum", [cx.add("subtract", [taken, cx.full(1, taken.shape)]), cx.full(0, taken.shape)])
    flat_source = cx.reshape(cx.convert(source, x.shape.element_type.name), [element_count(source)])
    values = cx.add("gather", [flat_source, cx.reshape(position, [n, 1])],
                    {"offset_dims": (), "collapsed_slice_dims": (0,), "start_index_map": (0,), "index_vector_dim": 1,
                     "slice_sizes": (1,)}, shape=keep.shape.with_element_type(x.shape.element_type))
    return cx.reshape(cx.add("select", [keep, values, cx.reshape(x, [n])]), x.shape.dims)


def _masked_scatter_backward(cx: LoweringContext, grad, mask, sizes):
    """The gradient of masked_scatter's source: grad's masked elements, in row-major order, as
    source's first elements (the rest 0): the masked_scatter's gather transposed, a scatter to
    the running count's positions (unmasked ones out of range, which scatter skips)."""
    from hlocc.frontends.torch.ops_reduce import scan

    n, total = element_count(grad), element_count(cx.shape)
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
    columns = [cx.reshape(cx.broadcast_to(wrapped_index(cx, t, (x, p)), batch), list(batch) + [1])
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


def _indexed_first(cx: LoweringContext, x, indices) -> tuple:
    """Non-adjacent index tensors (x[i, :, j]): PyTorch puts the broadcast index dims first, then
    the others in order; that is x with the indexed dims moved to the front, indexed there. Returns
    (x, indices, the permutation) — the permutation None where the index tensors are adjacent."""
    positions = [i for i, t in enumerate(indices) if t is not None]
    if not positions or positions == list(range(positions[0], positions[-1] + 1)):
        return x, indices, None
    order = positions + [i for i in range(x.shape.rank) if i not in positions]
    moved = cx.add("transpose", [x], {"dimensions": tuple(order)},
                   shape=x.shape.with_dims([x.shape.dims[i] for i in order]))
    return moved, [indices[i] for i in order], order


def _index(cx: LoweringContext, x, indices):
    indices = list(indices) + [None] * (x.shape.rank - len(indices))
    x, indices, _ = _indexed_first(cx, x, indices)
    stacked, first, k, nb = _advanced_index(cx, x, indices)
    offset = tuple(range(first)) + tuple(range(first + nb, first + nb + x.shape.rank - first - k))
    sizes = tuple(1 if first <= i < first + k else d for i, d in enumerate(x.shape.dims))
    indexed = tuple(range(first, first + k))
    return cx.add("gather", [x, stacked], {"offset_dims": offset, "collapsed_slice_dims": indexed,
                                           "start_index_map": indexed, "index_vector_dim": nb,
                                           "slice_sizes": sizes}, shape=cx.shape)


def _index_put(cx: LoweringContext, x, indices, values, accumulate=False):
    indices = list(indices) + [None] * (x.shape.rank - len(indices))
    masks = [(i, t) for i, t in enumerate(indices) if t is not None and t.shape.element_type.name == "pred"]
    if len(masks) == 1 and sum(t is not None for t in indices) == 1 and _one_value(values):
        return _masked_put(cx, x, *masks[0], values, accumulate)
    moved, indices, order = _indexed_first(cx, x, indices)
    if order is not None:  # written through the moved x, moved back
        put = _index_put(cx, moved, indices, values, accumulate)
        back = [order.index(i) for i in range(len(order))]
        return cx.add("transpose", [put], {"dimensions": tuple(back)}, shape=x.shape)
    stacked, first, k, nb = _advanced_index(cx, x, indices)
    batch = stacked.shape.dims[:nb]
    update_dims = list(x.shape.dims[:first]) + list(batch) + list(x.shape.dims[first + k:])
    updates = cx.operand(values, x.shape.element_type.name, update_dims)
    window = tuple(range(first)) + tuple(range(first + nb, len(update_dims)))
    return cx.add("scatter", [x, stacked, updates],
                  {"update_window_dims": window, "inserted_window_dims": tuple(range(first, first + k)),
                   "scatter_dims_to_operand_dims": tuple(range(first, first + k)), "index_vector_dim": nb,
                   "to_apply": _scatter_computation(cx, "add" if accumulate else None, x.shape.element_type.name)},
                  shape=x.shape)


def _one_value(values) -> bool:
    return not hasattr(values, "shape") or values.shape.num_elements == 1


def _masked_put(cx: LoweringContext, x, first: int, mask, values, accumulate: bool):
    """x[..., mask] = v (or += v) of one value v: where the mask (over x's dims from `first`) holds,
    v (x + v), elsewhere x — no data-dependent shape, unlike reading x[mask]."""
    span = tuple(range(first, first + mask.shape.rank))
    if tuple(mask.shape.dims) != tuple(x.shape.dims[first:first + mask.shape.rank]):
        raise cx.error(f"a boolean mask of shape {list(mask.shape.dims)} does not match the indexed dimensions "
                       f"{list(x.shape.dims[first:first + mask.shape.rank])}")
    where = cx.add("broadcast", [mask], {"dimensions": span}, shape=x.shape.with_element_type(mask.shape.element_type))
    value = cx.operand(values, x.shape.element_type.name, x.shape.dims)
    return cx.add("select", [where, cx.add("add", [x, value]) if accumulate else value, x], shape=x.shape)


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
    "aten.index_select.default": _index_select,
    "aten.gather.default": _gather, "aten.index.Tensor": _index, "aten.index_put.default": _index_put,
    "aten.scatter.src": _scatter(None), "aten.scatter.value": _scatter(None),
    "aten.scatter_add.default": _scatter("add"), "aten.scatter_reduce.two": _scatter_reduce,
    "aten.slice_scatter.default": _slice_scatter, "aten.select_scatter.default": _select_scatter,
    "aten.scaled_dot_product_attention.default": _sdpa,
    "aten.searchsorted.Tensor": _searchsorted, "aten.searchsorted.Scalar": _searchsorted,
    "aten.bucketize.Tensor": _bucketize, "aten.bucketize.Scalar": _bucketize,
}
