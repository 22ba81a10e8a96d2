"""Table entries for `as_strided` and `as_strided_scatter`: a tensor's storage read, or written,
through explicit sizes, strides and a storage offset. aot_autograd writes them for a graph whose
inputs are overlapping views of one tensor, one of them mutated (its synthetic base: `f(b, b[1:])`
with `x.add_(1)` inside), and user code may call `x.as_strided(...)`.

hlocc's values have no storage, so a tensor's storage is rebuilt from its FakeTensor: a tensor
dense in its storage (its strides a permutation of row-major ones) holds the positions
storage_offset .. storage_offset + numel - 1, in the order of its strides, so its elements
transposed to that order and flattened are exactly those positions (`_storage`). Reading a
position outside them (the tensor is a view of a larger one) is refused by name where the sizes are
static, and is a run-time assertion where they are symbolic. `as_strided_scatter` writes into a
clone of its input (ATen's definition), whose storage starts at offset 0.

The positions offset + Σ i_k·stride_k are read without a gather where the strides allow:
- a row-major block (each stride the product of the sizes inside it; symbolic sizes too): one slice
  of the flat storage, reshaped; written by a dynamic-update-slice;
- static strides that nest (each dim's elements within one step of the next outer dim, so no two
  positions coincide): the storage sliced and reshaped to [n_1, s_1], each inner dim a slice of
  those rows reshaped to [n_k, s_k], the innermost a strided slice; written by the inverse chain of
  pads (interior padding for the innermost stride) and a select of the written positions;
- anything else (overlapping windows, symbolic strides that are not row-major): a gather (a
  scatter) at the computed positions, iotas times strides summed.
Dims of size 1, and on a read dims of stride 0, take no part (the result is broadcast along them).
"""

from __future__ import annotations

import operator
from functools import reduce
from itertools import permutations
from typing import TYPE_CHECKING, Any

from hlocc.frontends.torch.ops_shape import slice_dim
from hlocc.frontends.torch.types import to_dim
from hlocc.hlo.attributes import PadDim
from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.symbolic import Dim, lower_bound
from hlocc.hlo.types import Shape, primitive_type

if TYPE_CHECKING:  # (the rules' context; lowering.py imports this table)
    from hlocc.frontends.torch.lowering import LoweringContext

_PRED = primitive_type("pred")


def _product(dims) -> Dim:
    return reduce(operator.mul, dims, 1)


def _storage_order(cx: LoweringContext, meta: Any) -> list[int] | None:
    """The dims of a tensor from its outermost stride to its innermost, where it is dense in its
    storage (its strides row-major in some order of its dims: sorted where static, and symbolic ones
    tried in every order up to rank 4, a transpose's), else None."""
    facts = cx.lowering.facts
    dims = [to_dim(d, facts) for d in meta.shape]
    strides = [to_dim(s, facts) for s in meta.stride()]
    if all(isinstance(v, int) for v in dims + strides):
        orders = [sorted(range(len(dims)), key=lambda d: -strides[d])]
    else:
        orders = permutations(range(len(dims))) if len(dims) <= 4 else [range(len(dims))]
    for order in orders:
        if _row_major([dims[d] for d in order], [strides[d] for d in order]):
            return list(order)
    return None


def _row_major(sizes, strides) -> bool:
    """Whether `strides` are the row-major strides of `sizes` (a size-1 dim's stride is free)."""
    expected = 1
    for size, stride in zip(reversed(sizes), reversed(strides)):
        if size != 1 and stride != expected:
            return False
        expected = expected * size
    return True


def _storage(cx: LoweringContext, x: HloInstruction, order: list[int]) -> HloInstruction:
    """`x`'s elements in storage order (`order`: `_storage_order`), flattened."""
    if order != sorted(order):
        x = cx.add("transpose", [x], {"dimensions": tuple(order)},
                   shape=x.shape.with_dims([x.shape.dims[d] for d in order]))
    return cx.reshape(x, [_product(x.shape.dims)])


def _from_storage(cx: LoweringContext, flat: HloInstruction, shape: Shape, order: list[int]) -> HloInstruction:
    """The inverse of `_storage`: flat storage back to a tensor of `shape`."""
    x = cx.reshape(flat, [shape.dims[d] for d in order])
    if order == sorted(order):
        return x
    return cx.add("transpose", [x], {"dimensions": tuple(order.index(d) for d in range(len(order)))}, shape=shape)


def _as_strided(cx: LoweringContext, x, size, stride, storage_offset=None):
    """`x.as_strided(size, stride, storage_offset)`: the elements at storage positions
    storage_offset + Σ i_k·stride_k (module doc); the offset defaults to x's own."""
    meta = cx.node.args[0].meta["val"]
    order = _storage_order(cx, meta)
    if order is None:
        raise cx.error(f"as_strided of a tensor not dense in its storage, or whose symbolic strides hlocc cannot "
                       f"order (sizes {list(meta.shape)}, strides {list(meta.stride())})")
    own = to_dim(meta.storage_offset(), cx.lowering.facts)
    start = (own if storage_offset is None else storage_offset) - own
    flat = _storage(cx, x, order)
    size, stride = list(size), list(stride)
    if any(n == 0 for n in size):
        return cx.full(0, cx.shape)
    _check_within(cx, flat.shape.dims[0], start, size, stride)
    kept = [k for k in range(len(size)) if size[k] != 1 and stride[k] != 0]
    sizes, strides = [size[k] for k in kept], [stride[k] for k in kept]
    if _row_major(sizes, strides):
        values = cx.reshape(slice_dim(cx, flat, 0, start, _product(sizes)), sizes)
    elif (nest := _nesting(sizes, strides, start, flat.shape.dims[0])) is not None:
        values = _read_nested(cx, flat, sizes, strides, start, nest)
    else:
        positions = _positions(cx, sizes, strides, start)
        values = cx.add("gather", [flat, cx.reshape(positions, [*sizes, 1])],
                        {"offset_dims": (), "collapsed_slice_dims": (0,), "start_index_map": (0,),
                         "index_vector_dim": len(sizes), "slice_sizes": (1,)}, shape=flat.shape.with_dims(sizes))
    if len(kept) == len(size):
        return values
    return cx.add("broadcast", [values], {"dimensions": tuple(kept)}, shape=cx.shape)


def _as_strided_scatter(cx: LoweringContext, x, src, size, stride, storage_offset=None):
    """`torch.as_strided_scatter`: a clone of `x` (dense, offset 0: row-major where `x` is not dense
    in its storage) whose positions storage_offset + Σ i_k·stride_k hold `src` (module doc)."""
    meta = cx.node.args[0].meta["val"]
    order = _storage_order(cx, meta) or list(range(x.shape.rank))
    start = 0 if storage_offset is None else storage_offset
    size, stride = list(size), list(stride)
    if any(n == 0 for n in size):
        return x
    flat = _storage(cx, x, order)
    total = flat.shape.dims[0]
    _check_within(cx, total, start, size, stride)
    kept = [k for k in range(len(size)) if size[k] != 1]
    sizes, strides = [size[k] for k in kept], [stride[k] for k in kept]
    values = cx.reshape(cx.convert(src, x.shape.element_type.name), sizes)
    if _row_major(sizes, strides):
        written = cx.add("dynamic-update-slice", [flat, cx.reshape(values, [_product(sizes)]),
                                                  cx.constant(start, "s64")], shape=flat.shape)
    elif (nest := _nesting(sizes, strides, start, total)) is not None:
        placed = _embed_nested(cx, values, strides, start, total, nest, 0)
        where = _embed_nested(cx, cx.full(True, values.shape.with_element_type(_PRED)), strides, start, total, nest,
                              False)
        written = cx.add("select", [where, placed, flat], shape=flat.shape)
    else:
        positions = _positions(cx, sizes, strides, start)
        written = cx.add("scatter", [flat, cx.reshape(positions, [*sizes, 1]), values],
                         {"update_window_dims": (), "inserted_window_dims": (0,), "scatter_dims_to_operand_dims": (0,),
                          "index_vector_dim": len(sizes), "to_apply": cx.reducer("assign", x.shape.element_type.name)},
                         shape=flat.shape)
    return _from_storage(cx, written, x.shape, order)


def _check_within(cx: LoweringContext, total: Dim, start: Dim, size: list, stride: list) -> None:
    """Every position read or written lies in the storage hlocc has (the tensor's own elements): an
    error where static, a run-time assertion (the graph's RuntimeError) where not provable."""
    last = start + sum((n - 1) * s for n, s in zip(size, stride))
    low, room = lower_bound(start), lower_bound(total - 1 - last)
    if low is not None and low >= 0 and room is not None and room >= 0:
        return
    if all(isinstance(v, int) for v in (total, start, last)):
        raise cx.error(f"reads storage positions {start}..{last} of a tensor whose own elements are positions "
                       f"0..{total - 1} (a view of a larger tensor, whose other elements the graph does not have)")
    scalar = Shape.array("s64", ())
    first, final = cx.constant(start, "s64"), cx.constant(last, "s64")
    inside = cx.add("and", [cx.add("compare", [first, cx.constant(0, "s64")], {"direction": "GE"},
                                   shape=scalar.with_element_type(_PRED)),
                            cx.add("compare", [final, cx.constant(total, "s64")], {"direction": "LT"},
                                   shape=scalar.with_element_type(_PRED))])
    cx.lowering.assertions.append((inside, f"{cx.where()}: the strided positions fall outside the tensor's own "
                                           "elements (a view of a larger tensor, which hlocc does not see)"))


def _nesting(sizes: list, strides: list, start: Dim, total: Dim) -> list[int] | None:
    """The order of the dims (outermost first) in which static strides nest: strictly decreasing
    and positive, each inner dim's span within one step of the dim outside it. None otherwise."""
    if not sizes or not all(isinstance(v, int) for v in [*sizes, *strides, start, total]):
        return None
    order = sorted(range(len(sizes)), key=lambda k: -strides[k])
    n, s = [sizes[k] for k in order], [strides[k] for k in order]
    if s[-1] <= 0 or any(a <= b for a, b in zip(s, s[1:])):
        return None
    if any(n[j + 1] * s[j + 1] > s[j] for j in range(len(n) - 2)):
        return None
    if len(n) >= 2 and (n[-1] - 1) * s[-1] + 1 > s[-2]:
        return None
    return order


def _read_nested(cx: LoweringContext, flat, sizes, strides, start: int, order: list[int]) -> HloInstruction:
    """The elements at start + Σ i_k·s_k by slices and reshapes (`_nesting`'s order), in `sizes`' order."""
    n, s = [sizes[k] for k in order], [strides[k] for k in order]
    v = flat
    for j in range(len(n) - 1):  # [n_0 .. n_j, s_j]: row i_0..i_j, its s_j elements from that position
        base = start if j == 0 else 0
        if j == 0 and start + n[0] * s[0] > flat.shape.dims[0]:  # (the last row's tail, never read)
            v = _pad(cx, v, 0, 0, start + n[0] * s[0] - flat.shape.dims[0], 0, 0)
        v = slice_dim(cx, v, j, base, n[j] * s[j])
        v = cx.reshape(v, [*n[:j + 1], s[j]])
    last = len(n) - 1
    v = slice_dim(cx, v, last, start if last == 0 else 0, n[-1], s[-1])
    if order == sorted(order):
        return v
    return cx.add("transpose", [v], {"dimensions": tuple(order.index(k) for k in range(len(order)))},
                  shape=v.shape.with_dims(sizes))


def _embed_nested(cx: LoweringContext, values, strides, start: int, total: int, order: list[int],
                  fill) -> HloInstruction:
    """The inverse of `_read_nested`: `values` at their storage positions of a [total] array, `fill`
    elsewhere (pads; the innermost stride as interior padding)."""
    if order != sorted(order):
        values = cx.add("transpose", [values], {"dimensions": tuple(order)},
                        shape=values.shape.with_dims([values.shape.dims[k] for k in order]))
    n, s = list(values.shape.dims), [strides[k] for k in order]
    last = len(n) - 1
    row = s[-2] if last > 0 else total - start
    v = _pad(cx, values, last, 0, row - (n[-1] - 1) * s[-1] - 1, s[-1] - 1, fill)
    for j in range(last - 1, -1, -1):  # [n_0 .. n_j, s_j] → [n_0 .. n_j·s_j] → pad to the outer step
        v = cx.reshape(v, [*n[:j], n[j] * s[j]])
        if j > 0:
            v = _pad(cx, v, j, 0, s[j - 1] - n[j] * s[j], 0, fill)
    if last > 0:  # [n_0·s_0] at `start` of the storage (a negative high pad crops the last row's tail)
        v = _pad(cx, v, 0, start, total - start - n[0] * s[0], 0, fill)
    else:
        v = _pad(cx, v, 0, start, 0, 0, fill)
    return v


def _pad(cx: LoweringContext, x, dim: int, low: int, high: int, interior: int, fill) -> HloInstruction:
    padding = [PadDim(0, 0)] * x.shape.rank
    padding[dim] = PadDim(low, high, interior)
    n = x.shape.dims[dim]
    dims = list(x.shape.dims)
    dims[dim] = n + low + high + max(n - 1, 0) * interior
    return cx.add("pad", [x, cx.constant(fill, x.shape.element_type.name)], {"padding": tuple(padding)},
                  shape=x.shape.with_dims(dims))


def _positions(cx: LoweringContext, sizes: list, strides: list, start: Dim) -> HloInstruction:
    """s64[sizes]: start + Σ iota_k·stride_k."""
    shape = Shape.array("s64", sizes)
    total = cx.full(start, shape)
    for k, stride in enumerate(strides):
        along = cx.add("iota", attrs={"iota_dimension": k}, shape=shape)
        if not (isinstance(stride, int) and stride == 1):
            along = cx.add("multiply", [along, cx.full(stride, shape)])
        total = cx.add("add", [total, along])
    return total


OPS = {
    "aten.as_strided.default": _as_strided, "aten.as_strided_copy.default": _as_strided,
    "aten.as_strided_scatter.default": _as_strided_scatter,
}
