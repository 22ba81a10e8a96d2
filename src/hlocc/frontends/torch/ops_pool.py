"""Table entries for max pooling with indices and its backward (what training a CNN with MaxPool
needs: aot_autograd saves the indices of the forward for `max_pool2d_with_indices_backward`).

The values are one HLO reduce-window (`ops_reduce.max_pool`); the indices follow ATen's CPU kernel
(`aten/src/ATen/native/cpu/MaxPoolKernel.cpp`): the flat position in the input plane (h·W + w) of the
first maximum in window scan order, NaN counting as the maximum, padding never chosen. They are
computed by visiting the k_h·k_w window offsets in that order, each a strided slice of the padded
input, keeping (value, index) with elementwise selects: the k·k steps fuse into one loop kernel.
The backward scatter-adds the output gradient at those indices.
"""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING

from hlocc.frontends.torch.ops_conv import expand_spatial
from hlocc.frontends.torch.ops_linalg import scatter_elements
from hlocc.frontends.torch.ops_reduce import max_pool
from hlocc.hlo.attributes import PadDim, SliceDim
from hlocc.hlo.types import primitive_type

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
    for i in range(k):
        extent = (outs[i] - 1) * stride[i] + (kernel[i] - 1) * dilation[i] + 1
        pads.append(PadDim(padding[i], max(0, extent - sizes[i] - padding[i])))
    padded = cx.add("pad", [x, cx.constant(lowest, et)], {"padding": tuple(pads)})
    index_shape = out_shape.with_element_type(_S64)
    best = best_index = found = None
    for offsets in itertools.product(*(range(n) for n in kernel)):
        limits = [SliceDim(0, d, 1) for d in x.shape.dims[:lead]]
        flat, valid = None, None
        for i, off in enumerate(offsets):
            start = off * dilation[i]
            limits.append(SliceDim(start, start + (outs[i] - 1) * stride[i] + 1, stride[i]))
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


def _max_pool_backward(cx: LoweringContext, grad, x, kernel, stride, padding, dilation, ceil_mode, indices):
    k = len(kernel)
    lead = list(x.shape.dims[:x.shape.rank - k])
    plane_in = math.prod(x.shape.dims[len(lead):])
    plane_out = math.prod(grad.shape.dims[len(lead):])
    zeros = cx.full(0, x.shape.with_dims(lead + [plane_in]))
    flat_grad = cx.reshape(grad, lead + [plane_out])
    flat_index = cx.reshape(indices, lead + [plane_out])
    return cx.reshape(scatter_elements(cx, zeros, len(lead), flat_index, flat_grad, "add"), x.shape.dims)


OPS = {
    "aten.max_pool2d_with_indices.default": _max_pool_with_indices,
    "aten.max_pool3d_with_indices.default": _max_pool_with_indices,
    "aten.max_pool2d_with_indices_backward.default": _max_pool_backward,
    "aten.max_pool3d_with_indices_backward.default": _max_pool_backward,
}
