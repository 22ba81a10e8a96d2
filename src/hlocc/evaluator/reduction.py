"""Reduction machinery shared by `reduce` and `reduce-window` in the reference evaluator.

XLA reduces with a scalar computation `to_apply` that takes 2N scalars (N accumulators, then N
input elements) and returns N scalars; the order in which elements are combined is unspecified
(the combiner is assumed associative and commutative), and the init value is folded in once.

Two strategies, chosen per call:
  * fast: a `to_apply` that is a single add/multiply/maximum/minimum/and/or of its two
    parameters (N = 1) becomes the numpy ufunc's `reduce`. Floats narrower than f32 (bf16, f16,
    f8, f4) accumulate in f32 and are rounded once at the end; sub-byte integers accumulate in
    32 bits and wrap to their width (the same result modulo 2^bits). maximum/minimum propagate
    NaN, as XLA's do.
  * general: a pairwise tree over the reduced elements, in order (element 2i with 2i+1), each
    level one `ev.call(to_apply, ...)` on whole arrays, then `to_apply(init, partial)`. Never a
    Python loop over elements: log2(R) + 1 calls for R reduced elements.

Both accept a `valid` mask (reduce-window's padding and base-dilation holes): invalid elements
are skipped, not combined, so a window of only padding yields the init value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from hlocc.hlo.ir import HloComputation
from hlocc.hlo.types import from_dtype

FAST_COMBINERS = {
    "add": np.add,
    "multiply": np.multiply,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "and": np.bitwise_and,
    "or": np.bitwise_or,
}


def accumulation_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype the fast path accumulates `dtype` in: f32 for floats narrower than 32 bits,
    32-bit integers for sub-byte integers, `dtype` itself otherwise."""
    ptype = from_dtype(dtype)
    if ptype.is_float and ptype.bits < 32:
        return np.dtype(np.float32)
    if ptype.is_integer and ptype.bits < 8:
        return np.dtype(np.int32 if ptype.is_signed else np.uint32)
    return np.dtype(dtype)


def fast_combiner(comp: HloComputation) -> str | None:
    """The opcode of `comp` when it is exactly `op(p0, p1)` (either operand order) for one of
    FAST_COMBINERS on two scalars of one type, else None."""
    params = comp.parameters
    root = comp.root
    if len(params) != 2 or root is None or root.opcode not in FAST_COMBINERS or len(root.operands) != 2:
        return None
    if {id(o) for o in root.operands} != {id(p) for p in params}:
        return None
    shapes = {params[0].shape, params[1].shape, root.shape}
    if len(shapes) != 1 or root.shape.rank != 0:
        return None
    return root.opcode


def _flatten_reduced(x: np.ndarray, axes: Sequence[int]) -> np.ndarray:
    """`x` with the reduced `axes` moved last and merged into one axis. The merged length is
    given, not `-1`: numpy cannot infer it when a kept dimension is 0."""
    kept = [d for d in range(x.ndim) if d not in axes]
    moved = np.transpose(x, kept + list(axes))
    return moved.reshape(tuple(x.shape[d] for d in kept) + (math.prod(x.shape[d] for d in axes),))


def as_array_list(value: Any, n: int, shape: tuple[int, ...], dtypes: Sequence[np.dtype]) -> list[np.ndarray]:
    """A sub-computation's result as a list of `n` arrays of `shape` and the given dtypes
    (a computation whose root does not depend on its parameters returns scalars)."""
    values = list(value) if n > 1 or isinstance(value, tuple) else [value]
    return [np.broadcast_to(np.asarray(v, dtype=dt), shape) for v, dt in zip(values, dtypes)]


def combiner_identity(opcode: str, dtype: np.dtype) -> np.ndarray:
    """The identity element of a fast combiner in `dtype` (what a skipped element counts as)."""
    dtype = np.dtype(dtype)
    if opcode in ("add", "or"):
        return np.zeros((), dtype)
    if opcode == "multiply":
        return np.ones((), dtype)
    if opcode == "and":
        return np.asarray(True) if dtype == np.bool_ else np.invert(np.zeros((), dtype))
    lowest = opcode == "maximum"
    if dtype == np.bool_:
        return np.asarray(not lowest)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return np.asarray(info.min if lowest else info.max, dtype)
    return np.asarray(-np.inf if lowest else np.inf, dtype)


def reduce_fast(x: np.ndarray, axes: Sequence[int], init: np.ndarray, opcode: str,
                valid: np.ndarray | None = None) -> np.ndarray:
    """`init ⊕ reduce(x over axes)` with the numpy ufunc for `opcode`, in x's dtype; elements
    where `valid` is false are skipped."""
    ufunc = FAST_COMBINERS[opcode]
    acc = accumulation_dtype(x.dtype)
    axes = tuple(axes)
    init_acc = np.asarray(init).astype(acc)
    kept_shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    with np.errstate(all="ignore"):
        if any(x.shape[a] == 0 for a in axes):
            result = np.broadcast_to(init_acc, kept_shape)
        else:
            values = x.astype(acc)
            if valid is not None:
                values = np.where(valid, values, combiner_identity(opcode, acc))
            partial = ufunc.reduce(values, axis=axes, dtype=acc)
            result = ufunc(init_acc, partial)
        return np.asarray(result).astype(x.dtype)


def _combine(ev, comp, lhs, rhs, lhs_valid, rhs_valid, dtypes):
    """comp(lhs, rhs) where both are valid, else whichever is valid; and the combined validity."""
    n = len(lhs)
    out = as_array_list(ev.call(comp, lhs + rhs), n, lhs[0].shape, dtypes)
    if lhs_valid is None:
        return out, None
    out = [np.where(lhs_valid & rhs_valid, o, np.where(lhs_valid, a, b)) for o, a, b in zip(out, lhs, rhs)]
    return out, lhs_valid | rhs_valid


def reduce_tree(ev, comp: HloComputation, xs: Sequence[np.ndarray], axes: Sequence[int],
                inits: Sequence[np.ndarray], dtypes: Sequence[np.dtype],
                valid: np.ndarray | None = None) -> list[np.ndarray]:
    """Variadic reduction of `xs` over `axes` by a pairwise tree of `ev.call(comp, ...)`, then
    `comp(inits, partials)`; elements where `valid` is false are skipped. Returns one array per
    input, in `dtypes`."""
    n = len(xs)
    runs = [_flatten_reduced(np.asarray(x), axes) for x in xs]
    mask = None if valid is None else _flatten_reduced(np.broadcast_to(valid, np.shape(xs[0])), axes)
    kept_shape = runs[0].shape[:-1]
    with np.errstate(all="ignore"):
        while runs[0].shape[-1] > 1:
            length = runs[0].shape[-1]
            even = length - length % 2
            lhs = [r[..., 0:even:2] for r in runs]
            rhs = [r[..., 1:even:2] for r in runs]
            halves = (None, None) if mask is None else (mask[..., 0:even:2], mask[..., 1:even:2])
            out, out_mask = _combine(ev, comp, lhs, rhs, *halves, dtypes)
            if length % 2:
                out = [np.concatenate([o, r[..., even:]], axis=-1) for o, r in zip(out, runs)]
                out_mask = None if mask is None else np.concatenate([out_mask, mask[..., even:]], axis=-1)
            runs, mask = out, out_mask
        accs = [np.broadcast_to(np.asarray(i, dtype=dt), kept_shape) for i, dt in zip(inits, dtypes)]
        if runs[0].shape[-1] == 0:
            return [np.array(a) for a in accs]
        last = [r[..., 0] for r in runs]
        result = as_array_list(ev.call(comp, accs + last), n, kept_shape, dtypes)
        if mask is not None:
            result = [np.where(mask[..., 0], r, a) for r, a in zip(result, accs)]
    return [np.array(r) for r in result]


def reduce_arrays(ev, comp: HloComputation, xs: Sequence[np.ndarray], axes: Sequence[int],
                  inits: Sequence[np.ndarray], dtypes: Sequence[np.dtype],
                  valid: np.ndarray | None = None) -> list[np.ndarray]:
    """Reduce `xs` over `axes` with `comp` and fold in `inits`, skipping elements where `valid`
    is false: the fast ufunc path when `comp` allows it (one input whose dtype is the
    combiner's), the pairwise tree otherwise."""
    opcode = fast_combiner(comp) if len(xs) == 1 else None
    if opcode is not None and comp.root.shape.dtype == np.asarray(xs[0]).dtype:
        return [reduce_fast(np.asarray(xs[0]), axes, inits[0], opcode, valid)]
    return reduce_tree(ev, comp, xs, axes, inits, dtypes, valid)
