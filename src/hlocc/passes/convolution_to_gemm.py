"""`convolution-to-gemm`: a convolution as an im2col gather and one dot, so that a backend without a
convolution library (the cuda backend: no cuDNN) runs it as generated kernels and a gemm (issue 7;
the im2col lowering that XLA:CPU's and TensorFlow's convolution kernels use internally).

For a convolution with N batches, input features C = G·Cg (G feature groups), kernel positions
K = K1·…·Kd and output features F = G·Fg:

    x   = transpose(lhs)  → [N, S1..Sd, C]                    (batch, spatial, feature)
    p   = pad(x, 0)       with the window's padding (low/high, may be negative) and the lhs
                          dilation as interior padding
    col = concatenate over the kernel positions k of
          reshape(slice(p, start k·rhs_dilation, stride: the window stride)) → [N, O1..Od, K, C]
    w   = transpose(rhs)  → [K1..Kd, Cg, F] (reversed along the window's reversed dimensions)
    dot(col, w) contracting (K, Cg), with the group as a batch dimension when G > 1
        → [N, O1..Od, F] → transpose into the convolution's output dimension order

Each output element is the same sum of the same products as the convolution's, in another order
(as a convolution library's is). Left alone: batch_group_count > 1, dynamic shapes, empty outputs,
and convolutions inside fused computations. The slices and the concatenate fuse into one kernel
with the pad and the transposes; the memory the im2col buffer takes is K times the input's.
"""

from __future__ import annotations

import itertools

from hlocc.hlo.attributes import PadDim, SliceDim
from hlocc.hlo.ir import HloComputation, HloInstruction, HloModule
from hlocc.hlo.types import Shape
from hlocc.passes.base import HloPass, register_hlo_pass
from hlocc.passes.dce import replace_outside_fusions


def _convolution_dims(conv: HloInstruction):
    from hlocc.evaluator.convolution import conv_dimension_numbers

    return conv_dimension_numbers(conv)


def im2col_convolution(conv: HloInstruction) -> HloInstruction | None:
    """The replacement of `conv` (module doc), or None to keep it."""
    lhs, rhs = conv.operands
    if not (lhs.shape.is_static and rhs.shape.is_static and conv.shape.is_static) or conv.shape.num_elements == 0:
        return None
    if int(conv.attrs.get("batch_group_count", 1)) != 1:
        return None
    dn = _convolution_dims(conv)
    window = tuple(conv.attrs.get("window", ()))
    d = len(dn.input_spatial)
    if len(window) != d:
        return None
    groups = int(conv.attrs.get("feature_group_count", 1))
    comp: HloComputation = conv.parent
    etype = lhs.shape.element_type
    n, c = lhs.shape.dims[dn.input_batch], lhs.shape.dims[dn.input_feature]
    kernel = [rhs.shape.dims[k] for k in dn.kernel_spatial]
    cg, f = rhs.shape.dims[dn.kernel_input_feature], rhs.shape.dims[dn.kernel_output_feature]
    out = [conv.shape.dims[o] for o in dn.output_spatial]
    if c != cg * groups or f % groups:
        return None

    x = comp.add("transpose", [lhs], {"dimensions": (dn.input_batch, *dn.input_spatial, dn.input_feature)})
    if any(w.pad_lo or w.pad_hi or w.lhs_dilate != 1 for w in window):
        zero = comp.add("constant", [], shape=Shape.array(etype, ()), literal=etype.dtype.type(0))
        padding = (PadDim(0, 0), *(PadDim(w.pad_lo, w.pad_hi, w.lhs_dilate - 1) for w in window), PadDim(0, 0))
        x = comp.add("pad", [x, zero], {"padding": padding})
    positions = list(itertools.product(*(range(k) for k in kernel)))
    columns = []
    for position in positions:
        spec = [SliceDim(0, n)]
        for k, w, o in zip(position, window, out):
            start = k * w.rhs_dilate
            spec.append(SliceDim(start, start + (o - 1) * w.stride + 1, w.stride))
        spec.append(SliceDim(0, c))
        piece = comp.add("slice", [x], {"slice": tuple(spec)})
        columns.append(comp.add("reshape", [piece], shape=Shape.array(etype, (n, *out, 1, c))))
    col = columns[0] if len(columns) == 1 else comp.add("concatenate", columns, {"dimensions": (d + 1,)})

    w = rhs
    reversed_dims = tuple(k for k, wd in zip(dn.kernel_spatial, window) if wd.reversal)
    if reversed_dims:
        w = comp.add("reverse", [w], {"dimensions": reversed_dims})
    w = comp.add("transpose", [w], {"dimensions": (*dn.kernel_spatial, dn.kernel_input_feature,
                                                   dn.kernel_output_feature)})
    ktot = len(positions)
    result_type = conv.shape.element_type
    attrs = {k: v for k, v in conv.attrs.items() if k in ("operand_precision", "precision_config", "algorithm")}
    if groups == 1:
        w = comp.add("reshape", [w], shape=Shape.array(rhs.shape.element_type, (ktot, c, f)))
        dot = comp.add("dot", [col, w], {**attrs, "lhs_contracting_dims": (d + 1, d + 2),
                                         "rhs_contracting_dims": (0, 1)},
                       shape=Shape.array(result_type, (n, *out, f)))
        nhwf = dot
    else:
        fg = f // groups
        col = comp.add("reshape", [col], shape=Shape.array(etype, (n, *out, ktot, groups, cg)))
        w = comp.add("reshape", [w], shape=Shape.array(rhs.shape.element_type, (ktot, cg, groups, fg)))
        dot = comp.add("dot", [col, w], {**attrs, "lhs_batch_dims": (d + 2,), "rhs_batch_dims": (2,),
                                         "lhs_contracting_dims": (d + 1, d + 3), "rhs_contracting_dims": (0, 1)},
                       shape=Shape.array(result_type, (groups, n, *out, fg)))
        moved = comp.add("transpose", [dot], {"dimensions": (*range(1, d + 2), 0, d + 2)})  # [N, O.., G, Fg]
        nhwf = comp.add("reshape", [moved], shape=Shape.array(result_type, (n, *out, f)))
    # [N, O1..Od, F] → the output's dimension order: output dimension j is nhwf's dimension order[j].
    order = [0] * (d + 2)
    order[dn.output_batch] = 0
    for i, o in enumerate(dn.output_spatial):
        order[o] = 1 + i
    order[dn.output_feature] = d + 1
    result = comp.add("transpose", [nhwf], {"dimensions": tuple(order)}, shape=conv.shape)
    return result


@register_hlo_pass
class ConvolutionToGemm(HloPass):
    """Rewrites convolutions (outside fused computations) into im2col + dot (module doc)."""

    name = "convolution-to-gemm"

    def run(self, module: HloModule) -> bool:
        return replace_outside_fusions(module, "convolution", im2col_convolution)


__all__ = ["ConvolutionToGemm", "im2col_convolution"]
