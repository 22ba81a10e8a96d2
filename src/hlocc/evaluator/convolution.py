"""Reference evaluation of `convolution` (XLA ConvGeneralDilated).

convolution(lhs, rhs), window=W, dim_labels=L, feature_group_count=G, batch_group_count=B:
  * L names the batch/feature/spatial dims of the input (lhs), the input-feature/output-feature/
    spatial dims of the kernel (rhs) and the batch/feature/spatial dims of the output; W's i-th
    entry describes spatial dimension i (size = kernel spatial size, stride, low/high padding
    with zeros — negative removes input —, lhs_dilate = input dilation, rhs_dilate = kernel
    dilation, reversal = the kernel's spatial taps reversed).
  * output[b, o, s...] = sum over input features c of its group and taps k of
    input_padded_dilated[b, c, s*stride + k*rhs_dilate] * kernel[c, o, k].
  * G > 1: the input features are split into G contiguous groups of C/G (the kernel's input
    feature size); output features are split into G contiguous groups; group i of the output
    convolves group i of the input (stablehlo's split/concatenate definition).
  * B > 1: the input batch is split into B contiguous groups of N/B (the output batch); output
    features are split into B contiguous groups; group i of the output uses batch group i.
Arithmetic follows dot's (see dot.py `contraction_dtype`): bf16/f16/f8 in f32, integers wrap.
Implemented as im2col: a windowed view of the input, then one batched matmul per group.
"""

from __future__ import annotations

import numpy as np

from hlocc.evaluator.dot import contraction_dtype, to_result
from hlocc.evaluator.windows import window_view
from hlocc.hlo.attributes import ConvDimensionNumbers, WindowDim, parse_dim_labels
from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.opcodes import register_evaluator


def conv_dimension_numbers(instr: HloInstruction) -> ConvDimensionNumbers:
    labels = instr.attrs["dim_labels"]
    return parse_dim_labels(labels) if isinstance(labels, str) else labels


def convolve(lhs: np.ndarray, rhs: np.ndarray, window: tuple[WindowDim, ...], dnums: ConvDimensionNumbers,
             feature_groups: int, batch_groups: int, dtype: np.dtype) -> np.ndarray:
    """The convolution in `dtype`, with dims in the output order that `dnums` gives."""
    nsp = len(dnums.input_spatial)
    x = np.transpose(lhs.astype(dtype), (dnums.input_batch, dnums.input_feature) + dnums.input_spatial)
    k = np.transpose(rhs.astype(dtype), (dnums.kernel_output_feature, dnums.kernel_input_feature)
                     + dnums.kernel_spatial)
    n, c = x.shape[:2]
    o, cg = k.shape[:2]
    taps = k.shape[2:]
    trivial = (WindowDim(size=1), WindowDim(size=1))
    patches = window_view(x, trivial + tuple(window), np.zeros((), dtype))
    patches = patches.reshape(patches.shape[:2 + nsp] + taps)      # drop the two trivial tap axes
    out_spatial = patches.shape[2:2 + nsp]
    groups = feature_groups * batch_groups
    nb, og = n // batch_groups, o // groups
    # (B, n', G, Cg, S..., K...) -> (B, G, n', S..., Cg, K...) -> (groups, n'*S, Cg*K)
    p = patches.reshape((batch_groups, nb, feature_groups, cg) + out_spatial + taps)
    sp = tuple(range(4, 4 + nsp))
    kt = tuple(range(4 + nsp, 4 + 2 * nsp))
    p = np.transpose(p, (0, 2, 1) + sp + (3,) + kt)
    p = p.reshape(groups, nb * int(np.prod(out_spatial, dtype=np.int64)), cg * int(np.prod(taps, dtype=np.int64)))
    w = k.reshape((groups, og, cg * int(np.prod(taps, dtype=np.int64)))).transpose(0, 2, 1)
    with np.errstate(all="ignore"):
        y = np.matmul(p, w)                                              # (groups, n'*S, og)
    y = y.reshape((batch_groups, feature_groups, nb) + out_spatial + (og,))
    y = np.transpose(y, (2, 0, 1, 3 + nsp) + tuple(range(3, 3 + nsp)))  # (n', B, G, og, S...)
    y = y.reshape((nb, o) + out_spatial)
    inverse = [0] * (2 + nsp)
    inverse[dnums.output_batch] = 0
    inverse[dnums.output_feature] = 1
    for i, d in enumerate(dnums.output_spatial):
        inverse[d] = 2 + i
    return np.transpose(y, inverse)


@register_evaluator("convolution")
def evaluate_convolution(instr: HloInstruction, operands: list, ev):
    lhs, rhs = (np.asarray(v) for v in operands)
    result = instr.shape.dtype
    dtype = contraction_dtype(lhs.dtype, rhs.dtype, result=result)
    y = convolve(lhs, rhs, tuple(instr.attrs.get("window", ())), conv_dimension_numbers(instr),
                 int(instr.attrs.get("feature_group_count", 1)), int(instr.attrs.get("batch_group_count", 1)), dtype)
    return to_result(y, result)
