"""Table entries for max pooling with indices and its backward (what training a CNN with MaxPool
needs: aot_autograd saves the indices of the forward for `max_pool2d_with_indices_backward`), and
adaptive pooling (average and max, 1-3 spatial dims) with their backward, and replication padding's
backward (the same window sums).

The values are one HLO reduce-window (`ops_reduce.max_pool`); the indices follow ATen's CPU kernel
(`aten/src/ATen/native/cpu/MaxPoolKernel.cpp`): the flat position in the input plane (h·W + w) of the
first maximum in window scan order, NaN counting as the maximum, padding never chosen. They are
computed by visiting the k_h·k_w window offsets in that order, each a strided slice of the padded
input, keeping (value, index) with elementwise selects: the k·k steps fuse into one loop kernel.
The backward scatter-adds the output gradient at those indices.

Adaptive pooling's window i along a dimension of size n pooled to m is [floor(i·n/m), ceil((i+1)·n/m)):
windows of unequal sizes where m does not divide n. It is separable: a window is a box, so its sum
or max is a reduction along one dimension after another. Along each, the input is gathered into
[..., m, K, ...] by a constant index table (K the largest window; the short windows' extra slots
masked), then reduced over K: O(K) per output and dimension, one gather each. An average whose
windows are all equal stays one reduce-window.
"""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING

import numpy as np

from hlocc.frontends.torch.ops_conv import expand_spatial
from hlocc.frontends.torch.ops_linalg import scatter_elements
from hlocc.frontends.torch.ops_reduce import avg_pool, max_pool, reduce
from hlocc.frontends.torch.ops_shape import slice_dim
from hlocc.hlo.attributes import PadDim, SliceDim
from hlocc.hlo.symbolic import InconclusiveDimensionError
from hlocc.hlo.types import Shape, primitive_type

if TYPE_CHECKING:  # (the rules' context; lowering.py imports this table)
    from hlocc.frontends.torch.lowering import LoweringContext

_S64 = primitive_type("s64")


def _indices(cx: LoweringContext, x, kernel, stride, padding, dilation, out_shape):
    k = len(kernel)
    lead = x.shape.rank - k
    stride = expand_spatial(stride or kernel, k)
    kernel, padding, dilation = expand_spatial(kernel, k), expand_spatial(padding, k), expand_spatial(dilation, k)
    sizes, outs = x.shape.dims[lead:], out_shape.dims[lead:]
    et = x.shape.element_type.name
    lowest = -math.inf if x.shape.element_type.is_float else 0
    pads = [PadDim(0, 0)] * lead
    for i in range(k):  # each offset's slice ends a stride past its last element (below)
        extent = outs[i] * stride[i] + (kernel[i] - 1) * dilation[i]
        try:
            high = max(0, extent - sizes[i] - padding[i])
        except InconclusiveDimensionError:  # a symbolic size: a pad that covers the extent at any size
            high = padding[i] + 2 * stride[i] - 1  # (ATen's count, floor or ceil mode, keeps it below)
        pads.append(PadDim(padding[i], high))
    padded = cx.add("pad", [x, cx.constant(lowest, et)], {"padding": tuple(pads)})
    index_shape = out_shape.with_element_type(_S64)
    best = best_index = found = None
    for offsets in itertools.product(*(range(n) for n in kernel)):
        limits = [SliceDim(0, d, 1) for d in x.shape.dims[:lead]]
        flat, valid = None, None
        for i, off in enumerate(offsets):
            start = off * dilation[i]
            # `start + outs * stride`, not the `+ (outs - 1) * stride + 1` of its last element: the same
            # elements, and a limit the symbolic algebra can show is >= start (floordiv(s, 2) windows)
            limits.append(SliceDim(start, start + outs[i] * stride[i], stride[i]))
            position = cx.add("iota", attrs={"iota_dimension": lead + i}, shape=index_shape)
            position = cx.add("add", [cx.add("multiply", [position, cx.full(stride[i], index_shape)]),
                                      cx.full(start - padding[i], index_shape)])
            inside = cx.add("and", [cx.add("compare", [position, cx.full(0, index_shape)], {"direction": "GE"}),
                                    cx.add("compare", [position, cx.full(sizes[i], index_shape)], {"direction": "LT"})])
            valid = inside if valid is None else cx.add("and", [valid, inside])
            flat = position if flat is None else cx.add("add", [cx.add("multiply", [flat, cx.full(
                sizes[i], index_shape)]), position])
        value = cx.add("slice", [padded], {"slice": tuple(limits)}, shape=out_shape)
        if best is None:
            best, best_index, found = value, flat, valid
            continue
        better = cx.add("compare", [value, best], {"direction": "GT"})
        if x.shape.element_type.is_float:
            better = cx.add("or", [better, cx.add("compare", [value, value], {"direction": "NE"})])
        take = cx.add("and", [valid, cx.add("or", [better, cx.add("not", [found])])])
        best = cx.add("select", [take, value, best])
        best_index = cx.add("select", [take, flat, best_index])
        found = cx.add("or", [found, valid])
    return best_index


def _max_pool_with_indices(cx: LoweringContext, x, kernel, stride=(), padding=(0,), dilation=(1,), ceil_mode=False):
    values, _ = max_pool(cx, x, kernel, stride, padding, dilation, ceil_mode)
    return [values, _indices(cx, x, kernel, stride, padding, dilation, values.shape)]


def _scatter_to_plane(cx: LoweringContext, grad, x, indices, k: int):
    """The gradient of x for a max pooling over its last `k` dims: `grad` scatter-added at the flat
    plane positions `indices` (the forward's)."""
    lead = list(x.shape.dims[:x.shape.rank - k])
    plane_in = math.prod(x.shape.dims[len(lead):])
    plane_out = math.prod(grad.shape.dims[len(lead):])
    zeros = cx.full(0, x.shape.with_dims(lead + [plane_in]))
    flat_grad = cx.reshape(grad, lead + [plane_out])
    flat_index = cx.reshape(indices, lead + [plane_out])
    # (the indices are the forward's own, in range: eager's backward checks none)
    return cx.reshape(scatter_elements(cx, zeros, len(lead), flat_index, flat_grad, "add", check=False), x.shape.dims)


def _max_pool_backward(cx: LoweringContext, grad, x, kernel, stride, padding, dilation, ceil_mode, indices):
    return _scatter_to_plane(cx, grad, x, indices, len(kernel))


# -- adaptive pooling ---------------------------------------------------------------------------
def _adaptive_windows(n: int, m: int) -> list[range]:
    """ATen's adaptive windows of a dimension of size n pooled to m (`start_index`, `end_index`)."""
    return [range(i * n // m, -(-(i + 1) * n // m)) for i in range(m)]


def _gather_windows(cx: LoweringContext, x, dim: int, windows: list) -> tuple:
    """x gathered along `dim` into [..., len(windows), K, ...] (K the longest window; window i's
    positions first, its unused slots repeat its last one, or 0 for an empty window) and the
    [len(windows), K] pred mask of the used slots, as a constant."""
    k = max(1, max(len(w) for w in windows))
    table = np.array([list(w) + [w[-1] if len(w) else 0] * (k - len(w)) for w in windows], dtype=np.int64)
    used = np.array([[j < len(w) for j in range(k)] for w in windows])
    index = cx.add("constant", shape=Shape.array(_S64, table.shape), literal=table)
    dims = list(x.shape.dims)
    out = dims[:dim] + [len(windows), k] + dims[dim + 1:]
    gathered = cx.add("gather", [x, index],
                      {"offset_dims": tuple(range(dim)) + tuple(range(dim + 2, len(out))),
                       "collapsed_slice_dims": (dim,), "start_index_map": (dim,), "index_vector_dim": 2,
                       "slice_sizes": tuple(1 if i == dim else d for i, d in enumerate(dims))},
                      shape=x.shape.with_dims(out))
    return gathered, used


def _mask(cx: LoweringContext, used: np.ndarray, dim: int, shape):
    """The constant mask `used` ([m, K]) broadcast to `shape` along dims dim, dim + 1."""
    literal = cx.add("constant", shape=Shape.array(primitive_type("pred"), used.shape), literal=used)
    return cx.add("broadcast", [literal], {"dimensions": (dim, dim + 1)},
                  shape=shape.with_element_type(primitive_type("pred")))


def _window_sums(cx: LoweringContext, x, dim: int, windows: list):
    """The sums of x over `windows` along `dim` (unused slots count 0)."""
    gathered, used = _gather_windows(cx, x, dim, windows)
    masked = cx.add("select", [_mask(cx, used, dim, gathered.shape), gathered, cx.full(0, gathered.shape)])
    return reduce(cx, masked, [dim + 1], "add")


def _along(cx: LoweringContext, x, sizes, dim: int):
    """A constant [len(sizes)] of x's type broadcast along `dim` of x's shape."""
    literal = cx.add("constant", shape=Shape.array(x.shape.element_type, (len(sizes),)),
                     literal=np.array(sizes).astype(x.shape.element_type.dtype))
    return cx.add("broadcast", [literal], {"dimensions": (dim,)}, shape=x.shape)


def _divide_by_window_sizes(cx: LoweringContext, total, k: int, all_windows):
    """total / k_1 / k_2 ... (each window's size along each pooled dim, in ATen's order)."""
    lead = total.shape.rank - k
    for d, windows in enumerate(all_windows):
        total = cx.add("divide", [total, _along(cx, total, [len(w) for w in windows], lead + d)])
    return total


def _adaptive_avg_pool(cx: LoweringContext, x, output_size):
    """adaptive_avg_pool{1,2,3}d: the window sums (module doc) divided by each window's size along
    each dim in turn, as ATen's CPU kernel divides its sum (`sum / kh / kw`); in f32 for halves."""
    k = len(output_size)
    lead = x.shape.rank - k
    spatial = x.shape.dims[lead:]
    if not all(isinstance(s, int) for s in spatial):
        return _symbolic_adaptive_avg_pool(cx, x, output_size)
    if all(s % o == 0 for s, o in zip(spatial, output_size)):
        kernel = [s // o for s, o in zip(spatial, output_size)]
        return avg_pool(cx, x, kernel, kernel, [0] * k)
    et = cx.element_type
    acc = "f32" if et in ("f16", "bf16") else et
    total = cx.convert(x, acc)
    all_windows = [_adaptive_windows(s, o) for s, o in zip(spatial, output_size)]
    for d in reversed(range(k)):  # (the innermost first, as the kernel's loops nest)
        total = _window_sums(cx, total, lead + d, all_windows[d])
    return cx.convert(_divide_by_window_sizes(cx, total, k, all_windows), et)


def _adaptive_membership(cx: LoweringContext, x, dim: int, m: int, et: str) -> tuple:
    """Over x's runtime size n along `dim`, ATen's adaptive windows of m outputs as a [m, n] pred
    (position j lies in window i: floor(i·n/m) <= j < ceil((i+1)·n/m)) and the [m] window sizes
    in `et` (the symbolic form of `_adaptive_windows`)."""
    n = x.shape.dims[dim]
    s64, pred = primitive_type("s64"), primitive_type("pred")
    size = cx.size_of(x, [dim], "s64")

    line = Shape.array(s64, (m,))
    i = cx.add("iota", attrs={"iota_dimension": 0}, shape=line)
    sizes, outputs = cx.add("broadcast", [size], {"dimensions": ()}, shape=line), cx.full(m, line)
    start = cx.add("divide", [cx.add("multiply", [i, sizes]), outputs])
    end = cx.add("divide", [cx.add("add", [cx.add("multiply", [cx.add("add", [i, cx.full(1, line)]), sizes]),
                                          cx.full(m - 1, line)]), outputs])
    grid = Shape.array(s64, (m, n))
    j = cx.add("iota", attrs={"iota_dimension": 1}, shape=grid)
    inside = cx.add("and", [cx.add("compare", [j, cx.add("broadcast", [bound], {"dimensions": (0,)}, shape=grid)],
                                   {"direction": direction}, shape=grid.with_element_type(pred))
                            for bound, direction in ((start, "GE"), (end, "LT"))])
    return inside, cx.convert(cx.add("subtract", [end, start]), et)


def _pool_along(cx: LoweringContext, x, dim: int, inside, m: int, transpose: bool):
    """Σ over x's dim of the positions in each window (→ m outputs there); `transpose`: over the
    m outputs of the windows holding each of the n positions (the backward's direction)."""
    dims = list(x.shape.dims)
    n = inside.shape.dims[1]
    wide = dims[:dim] + ([n, m] if transpose else [m, n]) + dims[dim + 1:]
    shape = x.shape.with_dims(wide)
    spread = cx.add("broadcast", [x], {"dimensions": tuple(i if i < dim else i + 1 for i in range(len(dims)))},
                    shape=shape)
    member = cx.add("broadcast", [inside], {"dimensions": (dim + 1, dim) if transpose else (dim, dim + 1)},
                    shape=shape.with_element_type(inside.shape.element_type))
    kept = cx.add("select", [member, spread, cx.full(0, shape)])
    return reduce(cx, kept, [dim + 1], "add")


def _symbolic_adaptive_avg_pool(cx: LoweringContext, x, output_size):
    """adaptive_avg_pool over symbolic spatial sizes: per pooled dim, the sum of each window's
    positions (a [m, n] membership of runtime bounds) divided by its runtime size."""
    k = len(output_size)
    lead = x.shape.rank - k
    et = cx.element_type
    acc = "f32" if et in ("f16", "bf16") else et
    total = cx.convert(x, acc)
    for d in reversed(range(k)):
        dim = lead + d
        inside, counts = _adaptive_membership(cx, x, dim, output_size[d], acc)
        total = _pool_along(cx, total, dim, inside, output_size[d], transpose=False)
        total = cx.add("divide", [total, cx.add("broadcast", [counts], {"dimensions": (dim,)}, shape=total.shape)])
    return cx.convert(total, et)


def _adaptive_avg_pool_backward(k: int):
    """Each input element gets grad / kh / kw of every window that holds it, as ATen's backward adds
    them: the gradient divided as the forward divides, then summed over the transposed windows
    (input position → the outputs whose window holds it; they cover every position), dim by dim."""
    def rule(cx: LoweringContext, grad, x):
        lead = x.shape.rank - k
        spatial, pooled = x.shape.dims[lead:], grad.shape.dims[lead:]
        et = cx.element_type
        acc = "f32" if et in ("f16", "bf16") else et
        if not all(isinstance(s, int) for s in spatial):
            total = cx.convert(grad, acc)
            for d in range(k):
                dim = lead + d
                inside, counts = _adaptive_membership(cx, x, dim, pooled[d], acc)
                total = cx.add("divide", [total, cx.add("broadcast", [counts], {"dimensions": (dim,)},
                                                        shape=total.shape)])
                total = _pool_along(cx, total, dim, inside, pooled[d], transpose=True)
            return cx.convert(total, et)
        all_windows = [_adaptive_windows(s, o) for s, o in zip(spatial, pooled)]
        total = _divide_by_window_sizes(cx, cx.convert(grad, acc), k, all_windows)
        for d in reversed(range(k)):
            holders = [[i for i, w in enumerate(all_windows[d]) if j in w] for j in range(spatial[d])]
            total = _window_sums(cx, total, lead + d, holders)
        return cx.convert(total, et)
    return rule


def _adaptive_max_pool(cx: LoweringContext, x, output_size):
    """adaptive_max_pool{1,2,3}d: (values, the flat plane index of each) as ATen's CPU kernel: it
    scans the window row-major taking an element that is NaN or greater than the running max, so
    the first maximum wins, or the last NaN. Separable (module doc): along the innermost dim first,
    each window's K slots visited in order with that rule, carrying the winner's flat index; along
    the next dim the winners of the rows compete by the same rule, which picks the row-major first
    maximum (the first row holding the max, its first) or last NaN (the last row holding a NaN, its
    last)."""
    k = len(output_size)
    lead = x.shape.rank - k
    spatial = x.shape.dims[lead:]
    if not all(isinstance(s, int) for s in spatial):
        raise cx.error("adaptive pooling of symbolic spatial sizes is not lowered")
    best, flat = x, None
    stride = 1
    for d in reversed(range(k)):
        dim = lead + d
        windows = _adaptive_windows(spatial[d], output_size[d])
        values, used = _gather_windows(cx, best, dim, windows)
        position = cx.add("iota", attrs={"iota_dimension": dim}, shape=best.shape.with_element_type(_S64))
        position = cx.add("multiply", [position, cx.full(stride, position.shape)])
        index = position if flat is None else cx.add("add", [position, flat])
        indices, _ = _gather_windows(cx, index, dim, windows)
        winner = winner_index = None
        for j in range(used.shape[1]):
            value, at = slice_dim(cx, values, dim + 1, j, 1), slice_dim(cx, indices, dim + 1, j, 1)
            value, at = (cx.reshape(v, v.shape.dims[:dim + 1] + v.shape.dims[dim + 2:]) for v in (value, at))
            if winner is None:
                winner, winner_index = value, at
                continue
            valid = cx.add("broadcast", [cx.add("constant", shape=Shape.array(primitive_type("pred"), (len(windows),)),
                                                literal=used[:, j].copy())], {"dimensions": (dim,)},
                           shape=value.shape.with_element_type(primitive_type("pred")))
            better = cx.add("or", [cx.add("compare", [value, winner], {"direction": "GT"}),
                                   cx.add("compare", [value, value], {"direction": "NE"})])
            take = cx.add("and", [valid, better])
            winner = cx.add("select", [take, value, winner])
            winner_index = cx.add("select", [take, at, winner_index])
        best, flat = winner, winner_index
        stride *= spatial[d]
    return [best, flat]


def _adaptive_max_pool_backward(k: int):
    def rule(cx: LoweringContext, grad, x, indices):
        return _scatter_to_plane(cx, grad, x, indices, k)
    return rule


def _replication_pad_backward(cx: LoweringContext, grad, x, padding):
    """replication_pad{1,2,3}d_backward: each input element gets the gradient of every output
    position that copies it (an edge element: itself and its padding), summed as windows (module
    doc) one padded dim at a time; `padding` is (lo, hi) pairs from the last dim."""
    et = cx.element_type
    acc = "f32" if et in ("f16", "bf16") else et
    total = cx.convert(grad, acc)
    for k in range(len(padding) // 2):
        dim = x.shape.rank - 1 - k
        n, out, lo = x.shape.dims[dim], grad.shape.dims[dim], padding[2 * k]
        if not all(isinstance(v, int) for v in (n, out)):
            raise cx.error("replication padding's backward over symbolic sizes is not lowered")
        holders = [[i for i in range(out) if min(max(i - lo, 0), n - 1) == j] for j in range(n)]
        total = _window_sums(cx, total, dim, holders)
    return cx.convert(total, et)


OPS = {
    "aten.max_pool2d_with_indices.default": _max_pool_with_indices,
    "aten.max_pool3d_with_indices.default": _max_pool_with_indices,
    "aten.max_pool2d_with_indices_backward.default": _max_pool_backward,
    "aten.max_pool3d_with_indices_backward.default": _max_pool_backward,
    "aten._adaptive_avg_pool2d.default": _adaptive_avg_pool, "aten._adaptive_avg_pool3d.default": _adaptive_avg_pool,
    "aten.adaptive_avg_pool1d.default": _adaptive_avg_pool,
    "aten._adaptive_avg_pool2d_backward.default": _adaptive_avg_pool_backward(2),
    "aten._adaptive_avg_pool3d_backward.default": _adaptive_avg_pool_backward(3),
    "aten.adaptive_max_pool2d.default": _adaptive_max_pool, "aten.adaptive_max_pool3d.default": _adaptive_max_pool,
    "aten.adaptive_max_pool1d.default": _adaptive_max_pool,
    "aten.adaptive_max_pool2d_backward.default": _adaptive_max_pool_backward(2),
    "aten.adaptive_max_pool3d_backward.default": _adaptive_max_pool_backward(3),
    "aten.replication_pad1d_backward.default": _replication_pad_backward,
    "aten.replication_pad2d_backward.default": _replication_pad_backward,
    "aten.replication_pad3d_backward.default": _replication_pad_backward,
}
