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


def dot_dimension_numbers(instr: HloInstruction) -> tuple[tuple[int, ...], ...]:
    attrs = instr.attrs
    return tuple(tuple(attrs.get(name, ())) for name in
                 ("lhs_contracting_dims", "rhs_contracting_dims", "lhs_batch_dims", "rhs_batch_dims"))


@register_evaluator("dot")
def evaluate_dot(instr: HloInstruction, operands: list, ev):
    lhs, rhs = (np.asarray(o) for o in operands)
    result = instr.shape.dtype
    dtype = contraction_dtype(lhs.dtype, rhs.dtype, result=result)
    return to_result(dot_general(lhs, rhs, *dot_dimension_numbers(instr), dtype), result)


def _drop_dim(dims: Sequence[int], removed: int) -> tuple[int, ...]:
    """Dimension numbers after dimension `removed` is deleted."""
    return tuple(d - (d > removed) for d in dims)


def _group_prefix(ragged: int, rank: int, contract: Sequence[int], batch: Sequence[int], mode: str) -> list[int]:
    """The operand dims that group_sizes' leading dims index, in order: the batch dims, then
    (by mode) the non-contracting or contracting dims before the ragged one; for a ragged batch
    dim only the batch dims before it."""
    if mode == "batch":
        return list(batch[:list(batch).index(ragged)])
    pool = list(contract) if mode == "contracting" else [d for d in range(rank) if d not in contract and d not in batch]
    return list(batch) + pool[:pool.index(ragged)]


def _group_masks(x: np.ndarray, ragged: int, prefix: list[int], sizes: np.ndarray) -> list[np.ndarray]:
    """For each group, a mask over `x` selecting the indices along `ragged` in that group;
    `sizes` is [prefix dims..., g] (or [g], broadcast), group i following group i-1."""
    sizes = np.broadcast_to(sizes.astype(np.int64), tuple(x.shape[d] for d in prefix) + sizes.shape[-1:])
    ends = np.cumsum(sizes, axis=-1)
    starts = ends - sizes
    order = list(np.argsort(prefix)) + [len(prefix)]   # prefix axes in increasing dim order
    shape = [x.shape[d] if d in prefix else 1 for d in range(x.ndim)]
    position = np.arange(x.shape[ragged]).reshape([-1 if d == ragged else 1 for d in range(x.ndim)])
    masks = []
    for g in range(sizes.shape[-1]):
        lo = np.transpose(starts, order)[..., g].reshape(shape)
        hi = np.transpose(ends, order)[..., g].reshape(shape)
        masks.append((position >= lo) & (position < hi))
    return masks


@register_evaluator("ragged-dot")
def evaluate_ragged_dot(instr: HloInstruction, operands: list, ev):
    """ragged-dot(lhs, rhs, group_sizes): consecutive runs of group_sizes[..., i] indices along
    lhs's ragged dim form group i (group_sizes is [prefix dims..., g], see `_group_prefix`, or
    [g]). By the kind of the ragged dim:
      * non-contracting (rhs has a group dim): group i's lhs rows are multiplied with rhs[group i];
        indices past the last group give zeros; result = the dot result;
      * contracting: result [g, dot result...], slice i contracting only over group i's indices
        (of both operands);
      * batch: an ordinary dot."""
    lhs, rhs, sizes = (np.asarray(o) for o in operands)
    lc, rc, lb, rb = dot_dimension_numbers(instr)
    (ragged,) = instr.attrs["lhs_ragged_dims"]
    group_dims = tuple(instr.attrs.get("rhs_group_dims", ()))
    mode = "batch" if ragged in lb else ("contracting" if ragged in lc else "noncontracting")
    result = instr.shape.dtype
    dtype = contraction_dtype(lhs.dtype, rhs.dtype, result=result)
    if mode == "batch":
        return to_result(dot_general(lhs, rhs, lc, rc, lb, rb, dtype), result)
    zero_l, zero_r = np.zeros((), lhs.dtype), np.zeros((), rhs.dtype)
    lhs_masks = _group_masks(lhs, ragged, _group_prefix(ragged, lhs.ndim, lc, lb, mode), sizes)
    if mode == "noncontracting":
        (gdim,) = group_dims
        partials = [dot_general(np.where(mask, lhs, zero_l), np.take(rhs, g, axis=gdim), lc, _drop_dim(rc, gdim),
                                lb, _drop_dim(rb, gdim), dtype) for g, mask in enumerate(lhs_masks)]
        return to_result(np.sum(partials, axis=0, dtype=dtype), result)
    rhs_ragged = rc[list(lc).index(ragged)]
    rhs_masks = _group_masks(rhs, rhs_ragged, _group_prefix(rhs_ragged, rhs.ndim, rc, rb, mode), sizes)
    partials = [dot_general(np.where(lm, lhs, zero_l), np.where(rm, rhs, zero_r), lc, rc, lb, rb, dtype)
                for lm, rm in zip(lhs_masks, rhs_masks)]
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
            raise UnsupportedError(f"scaled-dot scale of shape {s.shape} does not divide "
                                   f"its operand's shape {x.shape} into blocks")
    result = instr.shape.dtype
    dtype = contraction_dtype(lhs.dtype, rhs.dtype, result=result)
    with np.errstate(all="ignore"):
        lhs_f, rhs_f = _dequantize(lhs, lhs_scale, dtype), _dequantize(rhs, rhs_scale, dtype)
    return to_result(dot_general(lhs_f, rhs_f, *dot_dimension_numbers(instr), dtype), result)
