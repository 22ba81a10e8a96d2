"""Convolutions as gemms. Two passes:

- `convolution-gemm-fusion` (the cpu pipeline): a convolution and its elementwise epilogue as one
  dot fusion that the matmul emitter compiles as an *implicit gemm* (codegen/emitters/matmul.py
  `convolution_problem`): the packing of the gemm's panels reads the kernel and the input's patches
  through the convolution's indexing maps, so there is no im2col buffer, no library call and no
  separate epilogue kernel (the bias, a folded batch norm, the activation are the gemm's epilogue).
  Padding and lhs dilation cannot be an affine read (a padded element is a zero, not an address):
  the pass moves them into a `pad` of the input, which priority fusion then fuses into the
  input's producer or runs as one copy kernel; the convolution keeps strides, rhs dilation and
  reversal (all affine). `implicit_gemm_fuses` decides per convolution (below), the library call
  (runtime/library.py `convolution`) stays for the others.
- `convolution-to-gemm` (the cuda pipeline), described next.

`convolution-to-gemm`: a convolution as an im2col gather and one dot, so that a backend without a
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

import dataclasses
import itertools
import math

from hlocc.hlo.attributes import PadDim, SliceDim
from hlocc.hlo.call_graph import fusion_computations
from hlocc.hlo.ir import HloComputation, HloInstruction, HloModule
from hlocc.hlo.types import Shape
from hlocc.passes.base import HloPass, register_hlo_pass
from hlocc.passes.dce import replace_outside_fusions
from hlocc.passes.fusion_utils import FusionBuilder
from hlocc.passes.gemm_fusion import fuse_dot


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


IMPLICIT_GEMM_TYPES = frozenset({"f16", "bf16", "f32"})
"""Element types of the convolutions computed as implicit gemms: accumulated in f32, as XLA:CPU
and the evaluator do (f64 stays with the library's BLAS dgemm)."""


FEW_POSITIONS = 16
"""Output positions per image under which the positions cannot fill the gemm's n (16-lane
vectors): the features go along n where the kernel allows (`features_on_n`), else the
convolution stays a library call unless it is tiny (`NAIVE_WORK`)."""

FULL_ROW = 64
"""The packed micro-kernel's register block width (NR, codegen/schedule/choice.py's analytic
choice on AVX-512): fewer features along n leave part of every block's vectors empty."""

NAIVE_WORK = 32 ** 3
"""Multiply-adds per image under which the matmul emitter lowers naively (codegen/schedule/choice.py
NAIVE_BELOW, which this layer cannot import): a tiny convolution's naive kernel beats the library
call's Python (the small CNN's convolutions at batch 1: 15-23 µs against 76-101)."""


def _positions(conv: HloInstruction) -> int:
    return math.prod(conv.shape.dims[d] for d in _convolution_dims(conv).output_spatial)


def features_on_n(conv: HloInstruction) -> bool:
    """Whether the implicit gemm of `conv` puts its output features along n and (batch,
    positions) along m (codegen/emitters/matmul.py `convolution_problem`) rather than features
    along m and positions along n: where the kernel's output features are its minor dimension
    (the B panel is then packed from contiguous rows; from an OIHW kernel a strided gather, which
    measured 7x slower on a 2048 x 1000 1x1 convolution) and the output's features are its minor
    dimension too (NHWC) and fill the register block's 64 columns, or there are fewer than
    FEW_POSITIONS positions; and m, batch x positions, has FEW_POSITIONS rows at least (fewer, the
    packing of B, the whole kernel, is not paid back: one image of a 2048 -> 1000 1x1 convolution
    measured 0.67x the library's gemv). 16 features along n measured 2.8x slower than along m
    (the torch CNN's first convolution in NHWC, batch 16: 0.18 against 0.065 ms in NCHW)."""
    dn = _convolution_dims(conv)
    kernel, out = conv.operand(1).shape, conv.shape
    if kernel.minor_to_major[0] != dn.kernel_output_feature \
            or out.dims[dn.output_batch] * _positions(conv) < FEW_POSITIONS:
        return False
    features = kernel.dims[dn.kernel_output_feature] // int(conv.attrs.get("feature_group_count", 1))
    return _positions(conv) < FEW_POSITIONS or (out.minor_to_major[0] == dn.output_feature
                                                 and features >= FULL_ROW)


def implicit_gemm_fuses(conv: HloInstruction) -> bool:
    """Whether `convolution-gemm-fusion` makes `conv` an implicit gemm: float operands and result
    of static, non-empty shapes, no batch groups (a weight gradient of a grouped convolution:
    the library's evaluator path), and not a large one with too few positions for n whose
    kernel cannot take n either (`features_on_n`): its n < 16 gemm (the unpacked scalar register
    block) measured 0.76-0.78x the library's gemv on a 2048 -> 1000 1x1 convolution."""
    shapes = [conv.shape, *(o.shape for o in conv.operands)]
    if not all(s.is_array and s.is_static and s.num_elements > 0 for s in shapes):
        return False
    if not all(s.element_type.name in IMPLICIT_GEMM_TYPES for s in shapes):
        return False
    dn = _convolution_dims(conv)
    window = tuple(conv.attrs.get("window", ()))
    if int(conv.attrs.get("batch_group_count", 1)) != 1 or len(window) != len(dn.input_spatial):
        return False
    kernel = conv.operand(1).shape
    work = conv.shape.num_elements // conv.shape.dims[dn.output_batch] * kernel.num_elements \
        // kernel.dims[dn.kernel_output_feature]
    return features_on_n(conv) or _positions(conv) >= FEW_POSITIONS or work < NAIVE_WORK


def _without_padding(conv: HloInstruction) -> HloInstruction | None:
    """`conv` reading a zero-padded copy of its input (its padding and lhs dilation moved into a
    `pad`), or None when its window has neither or it is not an implicit gemm."""
    window = tuple(conv.attrs.get("window", ()))
    if not implicit_gemm_fuses(conv) or all(w.pad_lo == w.pad_hi == 0 and w.lhs_dilate == 1 for w in window):
        return None
    x, w = conv.operands
    dn = _convolution_dims(conv)
    comp: HloComputation = conv.parent
    padding = [PadDim(0, 0)] * x.shape.rank
    for d, wd in zip(dn.input_spatial, window):
        padding[d] = PadDim(wd.pad_lo, wd.pad_hi, wd.lhs_dilate - 1)
    etype = x.shape.element_type
    zero = comp.add("constant", [], shape=Shape.array(etype, ()), literal=etype.dtype.type(0))
    padded = comp.add("pad", [x, zero], {"padding": tuple(padding)})
    padded.shape = padded.shape.with_layout(x.shape.layout)  # the input's layout: no transpose
    bare = tuple(dataclasses.replace(wd, pad_lo=0, pad_hi=0, lhs_dilate=1) for wd in window)
    return comp.add("convolution", [padded, w], {**conv.attrs, "window": bare}, shape=conv.shape)


@register_hlo_pass
class ConvolutionGemmFusion(HloPass):
    """Convolutions (outside fused computations) with their epilogues as implicit-gemm fusions
    (module doc)."""

    name = "convolution-gemm-fusion"

    def run(self, module: HloModule) -> bool:
        changed = replace_outside_fusions(module, "convolution", _without_padding)
        builder = FusionBuilder(module)
        fused = fusion_computations(module)
        for comp in [c for c in module.computations if id(c) not in fused]:
            for conv in [i for i in comp.instructions if i.opcode == "convolution" and implicit_gemm_fuses(i)]:
                fuse_dot(builder, conv)
                changed = True
        builder.finish()
        return changed


@register_hlo_pass
class ConvolutionToGemm(HloPass):
    """Rewrites convolutions (outside fused computations) into im2col + dot (module doc)."""

    name = "convolution-to-gemm"

    def run(self, module: HloModule) -> bool:
        return replace_outside_fusions(module, "convolution", im2col_convolution)


__all__ = ["FEW_POSITIONS", "FULL_ROW", "IMPLICIT_GEMM_TYPES", "NAIVE_WORK", "ConvolutionGemmFusion",
           "ConvolutionToGemm", "features_on_n", "im2col_convolution", "implicit_gemm_fuses"]
