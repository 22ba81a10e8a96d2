"""Reference evaluation of `dot`, `ragged-dot` and `scaled-dot`.

dot(lhs, rhs) with lhs/rhs_contracting_dims and lhs/rhs_batch_dims (absent = none): the result
dims are the batch dims (lhs order), then lhs free dims, then rhs free dims, and each element is
the sum over the contracting dims of lhs * rhs.

Arithmetic (`contraction_dtype`): the result element type may differ from the operands'
(XLA's preferred_element_type); operands are converted to the computation type, multiplied and
accumulated there, and the result converted once to the result type:
  * complex anywhere: c128 if anything is 64-bit-float/128-bit-complex, else c64;
  * float anywhere: f64 if anything is f64, else f32 (so bf16/f16/f8 accumulate in f32 and are
    rounded at the end);
  * integer results: in the result type (wrapping), sub-byte results in 32 bits then wrapped;
  * pred results: counted in s32, true when non-zero (or of ands).
operand_precision and algorithm do not change the reference result (it is always the most
precise the computation type gives).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hlocc.errors import UnsupportedError
from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.opcodes import register_evaluator
from hlocc.hlo.types import from_dtype


def contraction_dtype(*dtypes: np.dtype, result: np.dtype) -> np.dtype:
    """The dtype a dot/convolution of operands `dtypes` giving `result` computes in."""
    types = [from_dtype(d) for d in (*dtypes, result)]
    wide = any((t.is_float and t.bits == 64) or (t.is_complex and t.bits == 128) for t in types)
    if any(t.is_complex for t in types):
        return np.dtype(np.complex128 if wide else np.complex64)
    if any(t.is_float for t in types):
        return np.dtype(np.float64 if wide else np.float32)
    out = types[-1]
    if out.is_pred:
        return np.dtype(np.int32)
    if out.bits < 8:
        return np.dtype(np.int32 if out.is_signed else np.uint32)
    return np.dtype(result)


def to_result(x: np.ndarray, result: np.dtype) -> np.ndarray:
    """Convert a contraction's computed value to the result type (rounding floats, wrapping
    integers, non-zero → true for pred)."""
    if np.dtype(result) == np.bool_:
        return np.asarray(x) != 0
    with np.errstate(all="ignore"):
        return np.asarray(x).astype(result)


def dot_general(lhs: np.ndarray, rhs: np.ndarray, lhs_contract: Sequence[int], rhs_contract: Sequence[int],
                lhs_batch: Sequence[int], rhs_batch: Sequence[int], dtype: np.dtype) -> np.ndarray:
    """XLA DotGeneral in `dtype`: result dims = batch, lhs free, rhs free."""
    lhs_free = [d for d in range(lhs.ndim) if d not in lhs_contract and d not in lhs_batch]
    rhs_free = [d for d in range(rhs.ndim) if d not in rhs_contract and d not in rhs_batch]
    batch_dims = [lhs.shape[d] for d in lhs_batch]
    lhs_free_dims = [lhs.shape[d] for d in lhs_free]
    rhs_free_dims = [rhs.shape[d] for d in rhs_free]
    k = int(np.prod([lhs.shape[d] for d in lhs_contract], dtype=np.int64))
    b = int(np.prod(batch_dims, dtype=np.int64))
    lhs3 = np.transpose(lhs.astype(dtype), list(lhs_batch) + lhs_free + list(lhs_contract))
    rhs3 = np.transpose(rhs.astype(dtype), list(rhs_batch) + list(rhs_contract) + rhs_free)
    lhs3 = lhs3.reshape(b, int(np.prod(lhs_free_dims, dtype=np.int64)), k)
    rhs3 = rhs3.reshape(b, k, int(np.prod(rhs_free_dims, dtype=np.int64)))
    with np.errstate(all="ignore"):
        out = np.matmul(lhs3, rhs3)
    return out.reshape(batch_dims + lhs_free_dims + rhs_free_dims)


def _dot_dims(instr: HloInstruction) -> tuple[tuple[int, ...], ...]:
    attrs = instr.attrs
    return tuple(tuple(attrs.get(name, ())) for name in
                 ("lhs_contracting_dims", "rhs_contracting_dims", "lhs_batch_dims", "rhs_batch_dims"))


@register_evaluator("dot")
def evaluate_dot(instr: HloInstruction, operands: list, ev):
    lhs, rhs = (np.asarray(o) for o in operands)
    result = instr.shape.dtype
    dtype = contraction_dtype(lhs.dtype, rhs.dtype, result=result)
    return to_result(dot_general(lhs, rhs, *_dot_dims(instr), dtype), result)


def _drop_dim(dims: Sequence[int], removed: int) -> tuple[int, ...]:
    """Dimension numbers after dimension `removed` is deleted."""
    return tuple(d - (d > removed) for d in dims)


@register_evaluator("ragged-dot")
def evaluate_ragged_dot(instr: HloInstruction, operands: list, ev):
    """ragged-dot(lhs, rhs, group_sizes) with 1-D group_sizes [g]; consecutive groups of
    group_sizes[i] indices along lhs's ragged dimension form group i. Two modes:
      * ragged non-contracting lhs dim, rhs group dim: the rows of group i are multiplied with
        rhs[group i]; rows past the last group give zeros; result = dot result without the group dim.
      * ragged contracting dim (no rhs group dim): result [g, dot result...], slice i contracting
        only over group i's indices.
    Ragged batch dims and multi-dimensional group_sizes raise UnsupportedError."""
    lhs, rhs, sizes = (np.asarray(o) for o in operands)
    lc, rc, lb, rb = _dot_dims(instr)
    (ragged,) = instr.attrs.get("lhs_ragged_dims", (None,))
    group_dims = tuple(instr.attrs.get("rhs_group_dims", ()))
    if ragged is None or sizes.ndim != 1 or ragged in lb:
        raise UnsupportedError(f"'{instr.name}': ragged-dot is evaluated only with 1-D group_sizes and a "
                               "ragged non-contracting or contracting lhs dimension")
    result = instr.shape.dtype
    dtype = contraction_dtype(lhs.dtype, rhs.dtype, result=result)
    ends = np.cumsum(sizes.astype(np.int64))
    starts = ends - sizes.astype(np.int64)
    position = np.arange(lhs.shape[ragged]).reshape([-1 if d == ragged else 1 for d in range(lhs.ndim)])
    partials = []
    for g in range(sizes.shape[0]):
        masked = np.where((position >= starts[g]) & (position < ends[g]), lhs, np.zeros((), lhs.dtype))
        if group_dims:
            (gdim,) = group_dims
            rhs_g = np.take(rhs, g, axis=gdim)
            partials.append(dot_general(masked, rhs_g, lc, _drop_dim(rc, gdim), lb, _drop_dim(rb, gdim), dtype))
        else:
            partials.append(dot_general(masked, rhs, lc, rc, lb, rb, dtype))
    if group_dims:
        return to_result(np.sum(partials, axis=0, dtype=dtype), result)
    return to_result(np.stack(partials), result)


def _dequantize(x: np.ndarray, scale: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """x * scale with each scale element covering a block of x (block = x dim / scale dim)."""
    expanded = scale.astype(dtype)
    for axis, (d, s) in enumerate(zip(x.shape, scale.shape)):
        if s != d:
            expanded = np.repeat(expanded, d // s, axis=axis)
    return x.astype(dtype) * expanded


@register_evaluator("scaled-dot")
def evaluate_scaled_dot(instr: HloInstruction, operands: list, ev):
    """scaled-dot(lhs, rhs, lhs_scale, rhs_scale): a dot of the block-dequantized operands
    (each operand times its scale, one scale element per block; blocks divide each dimension
    evenly). Scales of a different rank raise UnsupportedError."""
    lhs, rhs, lhs_scale, rhs_scale = (np.asarray(o) for o in operands)
    for x, s in ((lhs, lhs_scale), (rhs, rhs_scale)):
        if s.ndim != x.ndim or any(d % max(n, 1) for d, n in zip(x.shape, s.shape)):
            raise UnsupportedError(f"'{instr.name}': scaled-dot scale of shape {s.shape} does not divide "
                                   f"its operand's shape {x.shape} into blocks")
    result = instr.shape.dtype
    dtype = contraction_dtype(lhs.dtype, rhs.dtype, result=result)
    with np.errstate(all="ignore"):
        lhs_f, rhs_f = _dequantize(lhs, lhs_scale, dtype), _dequantize(rhs, rhs_scale, dtype)
    return to_result(dot_general(lhs_f, rhs_f, *_dot_dims(instr), dtype), result)
