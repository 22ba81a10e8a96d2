"""Reference evaluation of batch-norm-training, batch-norm-inference and batch-norm-grad.

`feature_index` names the feature dimension; statistics are taken over every other dimension.
Variances are biased (divided by the element count, not count - 1). Computed in f64 and
rounded once to the result type.
"""

from __future__ import annotations

import numpy as np

from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.opcodes import register_evaluator


def _setup(instr: HloInstruction, operand):
    """(x in f64, feature axis, reduction axes, a reshaper that broadcasts a feature vector)."""
    x = np.asarray(operand).astype(np.float64)
    feature = int(instr.attrs["feature_index"])
    axes = tuple(d for d in range(x.ndim) if d != feature)
    shape = [1] * x.ndim
    shape[feature] = x.shape[feature]

    def per_feature(v):
        return np.asarray(v).astype(np.float64).reshape(shape)

    return x, axes, per_feature


@register_evaluator("batch-norm-training")
def evaluate_batch_norm_training(instr: HloInstruction, operands: list, ev):
    """(operand, scale, offset) → (normalized, batch_mean, batch_var):
    normalized = (x - mean) / sqrt(var + epsilon) * scale + offset."""
    x, axes, per_feature = _setup(instr, operands[0])
    eps = float(instr.attrs["epsilon"])
    with np.errstate(all="ignore"):
        mean = np.mean(x, axis=axes, keepdims=True)
        var = np.mean(np.square(x - mean), axis=axes, keepdims=True)
        out = (x - mean) / np.sqrt(var + eps) * per_feature(operands[1]) + per_feature(operands[2])
    dtypes = [leaf.dtype for leaf in instr.shape.leaves()]
    return (out.astype(dtypes[0]), mean.reshape(-1).astype(dtypes[1]), var.reshape(-1).astype(dtypes[2]))


@register_evaluator("batch-norm-inference")
def evaluate_batch_norm_inference(instr: HloInstruction, operands: list, ev):
    """(operand, scale, offset, mean, variance) →
    (x - mean) / sqrt(variance + epsilon) * scale + offset."""
    x, _, per_feature = _setup(instr, operands[0])
    eps = float(instr.attrs["epsilon"])
    scale, offset, mean, var = (per_feature(v) for v in operands[1:])
    with np.errstate(all="ignore"):
        out = (x - mean) / np.sqrt(var + eps) * scale + offset
    return out.astype(instr.shape.dtype)


@register_evaluator("batch-norm-grad")
def evaluate_batch_norm_grad(instr: HloInstruction, operands: list, ev):
    """(operand, scale, mean, variance, grad_output) → (grad_operand, grad_scale, grad_offset)
    with r = 1/sqrt(variance + epsilon), per feature over the other dims:
      grad_offset = sum(grad_output)
      grad_scale = sum(grad_output * (x - mean) * r)
      grad_operand = scale * r * (grad_output - mean(grad_output)
                                  - (x - mean) * mean(grad_output * (x - mean)) * r²)."""
    x, axes, per_feature = _setup(instr, operands[0])
    eps = float(instr.attrs["epsilon"])
    scale, mean, var = (per_feature(v) for v in operands[1:4])
    dy = np.asarray(operands[4]).astype(np.float64)
    with np.errstate(all="ignore"):
        r = 1.0 / np.sqrt(var + eps)
        centered = x - mean
        grad_offset = np.sum(dy, axis=axes)
        grad_scale = np.sum(dy * centered * r, axis=axes)
        grad_operand = scale * r * (dy - np.mean(dy, axis=axes, keepdims=True)
                                    - centered * np.mean(dy * centered, axis=axes, keepdims=True) * r * r)
    dtypes = [leaf.dtype for leaf in instr.shape.leaves()]
    return (grad_operand.astype(dtypes[0]), grad_scale.astype(dtypes[1]), grad_offset.astype(dtypes[2]))
