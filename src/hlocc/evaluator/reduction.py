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
"""

from __future__ import annotations

from typing import Any, Sequence

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
    """`x` with the reduced `axes` moved last and merged into one axis."""
    kept = [d for d in range(x.ndim) if d not in axes]
    moved = np.transpose(x, kept + list(axes))
    return moved.reshape(tuple(x.shape[d] for d in kept) + (-1,))


def as_array_list(value: Any, n: int, shape: tuple[int, ...], dtypes: Sequence[np.dtype]) -> list[np.ndarray]:
    """A sub-computation's result as a list of `n` arrays of `shape` and the given dtypes
    (a computation whose root does not depend on its parameters returns scalars)."""
    values = list(value) if n > 1 or isinstance(value, tuple) else [value]
    return [np.broadcast_to(np.asarray(v, dtype=dt), shape) for v, dt in zip(values, dtypes)]


def reduce_fast(x: np.ndarray, axes: Sequence[int], init: np.ndarray, opcode: str) -> np.ndarray:
    """`init ⊕ reduce(x over axes)` with the numpy ufunc for `opcode`, in x's dtype."""
    ufunc = FAST_COMBINERS[opcode]
    acc = accumulation_dtype(x.dtype)
    axes = tuple(axes)
    init_acc = np.asarray(init).astype(acc)
    kept_shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    with np.errstate(all="ignore"):
        if any(x.shape[a] == 0 for a in axes):
            result = np.broadcast_to(init_acc, kept_shape)
        else:
            partial = ufunc.reduce(x.astype(acc), axis=axes, dtype=acc)
            result = ufunc(init_acc, partial)
        return np.asarray(result).astype(x.dtype)


def reduce_tree(ev, comp: HloComputation, xs: Sequence[np.ndarray], axes: Sequence[int],
                inits: Sequence[np.ndarray], dtypes: Sequence[np.dtype]) -> list[np.ndarray]:
    """Variadic reduction of `xs` over `axes` by a pairwise tree of `ev.call(comp, ...)`, then
    `comp(inits, partials)`; returns one array per input, in `dtypes`."""
    n = len(xs)
    runs = [_flatten_reduced(np.asarray(x), axes) for x in xs]
    kept_shape = runs[0].shape[:-1]
    with np.errstate(all="ignore"):
        while runs[0].shape[-1] > 1:
            length = runs[0].shape[-1]
            even = length - length % 2
            lhs = [r[..., 0:even:2] for r in runs]
            rhs = [r[..., 1:even:2] for r in runs]
            out = as_array_list(ev.call(comp, lhs + rhs), n, lhs[0].shape, dtypes)
            if length % 2:
                out = [np.concatenate([o, r[..., even:]], axis=-1) for o, r in zip(out, runs)]
            runs = out
        accs = [np.broadcast_to(np.asarray(i, dtype=dt), kept_shape) for i, dt in zip(inits, dtypes)]
        if runs[0].shape[-1] == 0:
            return [np.array(a) for a in accs]
        last = [r[..., 0] for r in runs]
        result = as_array_list(ev.call(comp, accs + last), n, kept_shape, dtypes)
    return [np.array(r) for r in result]


def reduce_arrays(ev, comp: HloComputation, xs: Sequence[np.ndarray], axes: Sequence[int],
                  inits: Sequence[np.ndarray], dtypes: Sequence[np.dtype]) -> list[np.ndarray]:
    """Reduce `xs` over `axes` with `comp` and fold in `inits`: the fast ufunc path when `comp`
    allows it (one input whose dtype is the combiner's), the pairwise tree otherwise."""
    opcode = fast_combiner(comp) if len(xs) == 1 else None
    if opcode is not None and comp.root.shape.dtype == np.asarray(xs[0]).dtype:
        return [reduce_fast(np.asarray(xs[0]), axes, inits[0], opcode)]
    return reduce_tree(ev, comp, xs, axes, inits, dtypes)
