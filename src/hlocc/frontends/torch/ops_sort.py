"""Table entries for sorts and order statistics: sort (stable or not, either direction), topk,
kthvalue, median and nanmedian (a stable sort along the dimension, then a pick), with ATen's NaN
order (NaN last in an ascending sort; median and kthvalue of a row holding a NaN as ATen gives them)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from hlocc.frontends.torch.ops_reduce import norm_dims, numel, reduce
from hlocc.frontends.torch.ops_shape import gather_along, slice_dim
from hlocc.hlo.ir import HloComputation, HloInstruction
from hlocc.hlo.types import Shape, primitive_type

if TYPE_CHECKING:  # (the rules' context; lowering.py imports this table)
    from hlocc.frontends.torch.lowering import LoweringContext


def _sorted(cx: LoweringContext, x, dim: int, descending: bool) -> tuple[HloInstruction, HloInstruction]:
    """(values, s64 indices) of `x` sorted along `dim`, stably (equal values keep their order, as
    PyTorch's stable sort and, in practice, its CPU sort and topk do): an HLO sort of (key, x, iota)
    on the key alone. A float key is x with NaN made +NaN and -0.0 made +0.0, compared in total
    order, so NaN sorts last ascending and first descending and ±0 tie, as in PyTorch; `values`
    are x's own elements."""
    dim = norm_dims(dim, x.shape.rank)[0]
    et = x.shape.element_type
    key = x
    if et.is_float:
        nan = cx.add("compare", [x, x], {"direction": "NE"})
        zero = cx.add("compare", [x, cx.full(0, x.shape)], {"direction": "EQ"})
        key = cx.add("select", [nan, cx.full(math.nan, x.shape), x])
        key = cx.add("select", [zero, cx.full(0, x.shape), key])
    iota = cx.add("iota", attrs={"iota_dimension": dim}, shape=x.shape.with_element_type(primitive_type("s64")))
    module = cx.lowering.module  # (computations only get added while lowering: the count names it uniquely)
    comparator = module.add_computation(HloComputation(
        f"sort_{'gt' if descending else 'lt'}_{et.name}_{len(module.computations)}"))
    params = [comparator.add_fresh(HloInstruction(comparator.unique_name("p"), "parameter",
                                                  Shape.array(t, ()), parameter_number=i))
              for i, t in enumerate((et, et, et, et, iota.shape.element_type, iota.shape.element_type))]
    attrs = {"direction": "GT" if descending else "LT"}
    if et.is_float:
        attrs["type"] = "TOTALORDER"
    comparator.root = comparator.add("compare", params[:2], attrs, shape=Shape.array(primitive_type("pred"), ()))
    result = cx.add("sort", [key, x, iota], {"dimensions": (dim,), "is_stable": True, "to_apply": comparator})
    return tuple(cx.add("get-tuple-element", [result], {"index": i}, shape=s.shape) for i, s in ((1, x), (2, iota)))


def _sort(cx: LoweringContext, x, dim=-1, descending=False):
    return list(_sorted(cx, x, dim, descending))


def _sort_stable(cx: LoweringContext, x, *, stable=None, dim=-1, descending=False):
    return list(_sorted(cx, x, dim, descending))


def _topk(cx: LoweringContext, x, k, dim=-1, largest=True, sorted=True):
    """The first k of a stable sort (largest: descending): sorted whatever `sorted` says, which only
    allows another order."""
    dim = norm_dims(dim, x.shape.rank)[0]
    return [slice_dim(cx, v, dim, 0, k) for v in _sorted(cx, x, dim, largest)]


def _order_statistic(cx: LoweringContext, x, dim, position, keepdim: bool, nan_first: bool = False):
    """(value, s64 index) of the element at `position` (an int, or an s64 tensor with x's shape
    but 1 along `dim`) of a stable ascending sort along `dim` (NaN last). `nan_first`: a row
    holding a NaN gives NaN and the index of its first NaN instead (torch.median)."""
    if x.shape.rank == 0:
        return x, cx.constant(0, "s64")
    dim = norm_dims(dim, x.shape.rank)[0]
    values, indices = _sorted(cx, x, dim, False)
    if isinstance(position, int):
        value, index = slice_dim(cx, values, dim, position, 1), slice_dim(cx, indices, dim, position, 1)
    else:
        value, index = gather_along(cx, values, dim, position), gather_along(cx, indices, dim, position)
    if nan_first and x.shape.element_type.is_float:
        nan = cx.add("compare", [x, x], {"direction": "NE"})
        any_nan = reduce(cx, nan, [dim], "or", keepdim=True)
        iota = cx.add("iota", attrs={"iota_dimension": dim}, shape=x.shape.with_element_type(primitive_type("s64")))
        first = reduce(cx, cx.add("select", [nan, iota, cx.full(2**62, iota.shape)]), [dim], "minimum", keepdim=True)
        value = cx.add("select", [any_nan, cx.full(math.nan, value.shape), value])
        index = cx.add("select", [any_nan, first, index])
    if not keepdim:
        kept = [d for i, d in enumerate(value.shape.dims) if i != dim]
        value, index = cx.reshape(value, kept), cx.reshape(index, kept)
    return value, index


def _kthvalue(cx: LoweringContext, x, k, dim=-1, keepdim=False):
    """torch.kthvalue: the k-th smallest (NaN largest) and its index. Of equal values the first is
    taken (ATen's quickselect may return another index of an equal value)."""
    return list(_order_statistic(cx, x, dim, k - 1, keepdim))


def _median_dim(ignore_nan: bool):
    """torch.median / nanmedian along a dim: the lower median ((n - 1) // 2-th smallest) and its
    index; median gives NaN and the first NaN's index for a row holding one, nanmedian the lower
    median of the row's other values (NaN for a row of NaNs)."""
    def rule(cx: LoweringContext, x, dim=-1, keepdim=False):
        if x.shape.rank == 0:
            return [x, cx.constant(0, "s64")]
        d = norm_dims(dim, x.shape.rank)[0]
        n = x.shape.dims[d]
        if not ignore_nan or not x.shape.element_type.is_float:
            middle = (n - 1) // 2
            if not isinstance(n, int):  # (a symbolic length: the position as a tensor)
                size = cx.size_of(x, [d], "s64")
                middle = cx.broadcast_to(cx.add("shift-right-arithmetic", [
                    cx.add("subtract", [size, cx.constant(1, "s64")]), cx.constant(1, "s64")]),
                    [1 if i == d else s for i, s in enumerate(x.shape.dims)])
            return list(_order_statistic(cx, x, d, middle, keepdim, nan_first=not ignore_nan))
        present = cx.convert(cx.add("compare", [x, x], {"direction": "EQ"}), "s64")
        count = reduce(cx, present, [d], "add", keepdim=True)
        position = cx.add("shift-right-arithmetic", [cx.add("maximum", [cx.add("subtract", [count, cx.full(
            1, count.shape)]), cx.full(0, count.shape)]), cx.full(1, count.shape)])
        return list(_order_statistic(cx, x, d, position, keepdim))
    return rule


def _median(ignore_nan: bool):
    """torch.median() / nanmedian() of all elements: the rule along one dim of the flattened tensor."""
    def rule(cx: LoweringContext, x):
        return _median_dim(ignore_nan)(cx, cx.reshape(x, [numel(x)]), 0)[0]
    return rule


OPS = {
    "aten.sort.default": _sort, "aten.sort.stable": _sort_stable, "aten.topk.default": _topk,
    "aten.kthvalue.default": _kthvalue, "aten.median.dim": _median_dim(False), "aten.nanmedian.dim": _median_dim(True),
    "aten.median.default": _median(False), "aten.nanmedian.default": _median(True),
}
