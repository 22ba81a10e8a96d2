"""Table entries for convolution: forward (`aten.convolution`, plain and transposed) and
`aten.convolution_backward` (the gradients of input, weight and bias), all as HLO convolutions.

The input gradient (and a transposed convolution, which is the same computation) convolves the
output-shaped operand, dilated by the forward stride (`lhs_dilate`), with the spatially reversed
kernel whose feature roles are swapped (`io` labels); the weight gradient convolves the input with
the output gradient as the kernel, batch and feature roles swapped (`fb` labels), the forward stride
becoming the kernel dilation. These are XLA's ConvBackwardInput/ConvBackwardFilter forms
(xla/service/... convolution_group_converter and the JAX transpose rules of `lax.conv_general_dilated`).
Groups: the input-gradient form regroups the kernel (each group's features transposed) under
feature groups, the weight gradient splits the input's features into batch groups; a transposed
convolution's backward is the forward convolution of the gradient and the weight gradient with the
operands' roles swapped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hlocc.hlo.attributes import SliceDim, WindowDim, parse_dim_labels

if TYPE_CHECKING:  # (the rules' context; lowering.py imports this table)
    from hlocc.frontends.torch.lowering import LoweringContext

_SPATIAL = "012"


def expand_spatial(values, k: int) -> list:
    """A per-spatial-dimension parameter (stride, padding, ...) given once or per dimension."""
    return list(values) * k if len(values) == 1 else list(values)


def _labels(cx: LoweringContext, lhs: str, rhs: str, out: str, k: int):
    s = _SPATIAL[:k]
    return parse_dim_labels(f"{lhs}{s}_{rhs}{s}->{out}{s}")


def _bias(cx: LoweringContext, out, bias):
    if bias is None:
        return out
    return cx.add("add", [out, cx.add("broadcast", [cx.convert(bias, out.shape.element_type.name)],
                                      {"dimensions": (1,)}, shape=out.shape)])


def _transposed(cx: LoweringContext, y, weight, stride, padding, dilation, out_spatial, shape, groups: int = 1):
    """The input-gradient form: `y` [N, O, ...] and `weight` [O, Cg, k...] (O = groups·Og) →
    [N, groups·Cg, out_spatial...]. The kernel is regrouped to [groups·Cg, Og, k...] (`oi`), each
    group's features transposed, so that feature groups pair y's group g with output group g."""
    k = y.shape.rank - 2
    reversed_weight = cx.add("reverse", [weight], {"dimensions": tuple(range(2, 2 + k))})
    o, cg, spatial = weight.shape.dims[0], weight.shape.dims[1], list(weight.shape.dims[2:])
    og = o // groups
    split = cx.reshape(reversed_weight, [groups, og, cg, *spatial])
    swapped = cx.add("transpose", [split], {"dimensions": (0, 2, 1, *range(3, 3 + k))},
                     shape=split.shape.with_dims([groups, cg, og, *spatial]))
    kernel = cx.reshape(swapped, [groups * cg, og, *spatial])
    window = []
    for i in range(k):
        size, extent = weight.shape.dims[2 + i], (weight.shape.dims[2 + i] - 1) * dilation[i] + 1
        lo = extent - 1 - padding[i]
        hi = out_spatial[i] - (y.shape.dims[2 + i] - 1) * stride[i] - 1 + padding[i]
        window.append(WindowDim(size=size, pad_lo=lo, pad_hi=hi, lhs_dilate=stride[i], rhs_dilate=dilation[i]))
    return cx.add("convolution", [y, kernel], {"window": tuple(window), "dim_labels": _labels(cx, "bf", "oi", "bf", k),
                                               "feature_group_count": groups}, shape=shape)


def _forward(cx: LoweringContext, x, weight, stride, padding, dilation, groups, shape):
    k = x.shape.rank - 2
    window = tuple(WindowDim(size=weight.shape.dims[2 + i], stride=stride[i], pad_lo=padding[i], pad_hi=padding[i],
                             rhs_dilate=dilation[i]) for i in range(k))
    return cx.add("convolution", [x, weight], {"window": window, "dim_labels": _labels(cx, "bf", "oi", "bf", k),
                                               "feature_group_count": groups}, shape=shape)


def _convolution(cx: LoweringContext, x, weight, bias, stride, padding, dilation, transposed, output_padding,
                 groups):
    k = x.shape.rank - 2
    stride, padding, dilation = expand_spatial(stride, k), expand_spatial(padding, k), expand_spatial(dilation, k)
    et = cx.element_type
    x, weight = cx.convert(x, et), cx.convert(weight, et)
    if transposed:
        return _bias(cx, _transposed(cx, x, weight, stride, padding, dilation, cx.shape.dims[2:], cx.shape, groups),
                     bias)
    return _bias(cx, _forward(cx, x, weight, stride, padding, dilation, groups, cx.shape), bias)


def _weight_gradient(cx: LoweringContext, x, grad, weight_shape, stride, padding, dilation, groups: int = 1):
    """dW[o, c, u..] = Σ_n,y grad[n, o, y..] · x[n, g(o)·Cg + c, y·stride + u·dilation − padding]
    (g(o) the group of output feature o: x's features are the convolution's batch here, split
    into `groups` batch groups, XLA's grouped filter gradient)."""
    k = x.shape.rank - 2
    window, crop = [], []
    for i in range(k):
        size_in, kernel = x.shape.dims[2 + i], weight_shape.dims[2 + i]
        hi = (kernel - 1) * dilation[i] + (grad.shape.dims[2 + i] - 1) * stride[i] + 1 - size_in - padding[i]
        # forward dropped trailing input (floor of the output size): crop it rather than pad negatively
        crop.append(size_in + min(hi, 0))
        window.append(WindowDim(size=grad.shape.dims[2 + i], stride=dilation[i], pad_lo=padding[i], pad_hi=max(hi, 0),
                                rhs_dilate=stride[i]))
    if any(c != d for c, d in zip(crop, x.shape.dims[2:])):
        limits = tuple([SliceDim(0, d, 1) for d in x.shape.dims[:2]] + [SliceDim(0, c, 1) for c in crop])
        x = cx.add("slice", [x], {"slice": limits}, shape=x.shape.with_dims(list(x.shape.dims[:2]) + crop))
    attrs = {"window": tuple(window), "dim_labels": _labels(cx, "fb", "io", "fb", k)}
    if groups != 1:
        attrs["batch_group_count"] = groups
    return cx.add("convolution", [x, grad], attrs, shape=weight_shape)


def _convolution_backward(cx: LoweringContext, grad, x, weight, bias_sizes, stride, padding, dilation, transposed,
                          output_padding, groups, output_mask):
    k = x.shape.rank - 2
    stride, padding, dilation = expand_spatial(stride, k), expand_spatial(padding, k), expand_spatial(dilation, k)
    shapes = cx.shapes()
    results = [None, None, None]
    if transposed:  # y = x ⋆ᵀ w: dx is the forward convolution of the gradient, dw the roles swapped
        if output_mask[0]:
            results[0] = _forward(cx, grad, weight, stride, padding, dilation, groups, shapes[0])
        if output_mask[1]:
            results[1] = _weight_gradient(cx, grad, x, shapes[1], stride, padding, dilation, groups)
    else:
        if output_mask[0]:
            results[0] = _transposed(cx, grad, weight, stride, padding, dilation, x.shape.dims[2:], shapes[0], groups)
        if output_mask[1]:
            results[1] = _weight_gradient(cx, x, grad, shapes[1], stride, padding, dilation, groups)
    if output_mask[2]:
        from hlocc.frontends.torch.ops_reduce import reduce

        results[2] = reduce(cx, grad, [0] + list(range(2, grad.shape.rank)), "add")
    return results


OPS = {
    "aten.convolution.default": _convolution,
    "aten.convolution_backward.default": _convolution_backward,
}
