"""Reference evaluation of `gather` and `scatter` with general dimension numbers.

Both ops pair a batch of *start index vectors* (taken from `indices` along `index_vector_dim`; when
that equals the rank of `indices` every index is an implicit 1-vector) with a *window* of the
operand, following XLA's operation semantics:

- gather: output = batch dims (the dims of `indices` other than `index_vector_dim`, in order) and
  offset dims (`offset_dims`, one per operand dim not in `collapsed_slice_dims` or
  `operand_batching_dims`, in increasing operand-dim order). Each start is clamped to
  `[0, operand_dim - slice_size]` so that the slice is in bounds.
- scatter: every element of `updates` names an operand element; update dims in
  `update_window_dims` are the window dims (operand dims not in `inserted_window_dims` or
  `input_batching_dims`), the others are scatter dims (the dims of `indices` other than
  `index_vector_dim`). A window that does not lie entirely inside the operand is skipped as a whole
  (XLA's implementation-defined choice for out-of-bounds scatter). The combiner `to_apply` is
  applied in row-major update order, so repeated indices combine in that order.

Batching dims: operand dim `operand_batching_dims[k]` (scatter: `input_batching_dims[k]`) starts
at the batch coordinate of indices dim `start_indices_batching_dims[k]`
(`scatter_indices_batching_dims[k]`).

Everything is vectorized: one index array per operand dim for the whole output (gather) or update
(scatter); the combiner runs on whole arrays, in rounds where no operand element repeats.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from hlocc.hlo.ir import HloComputation, HloInstruction
from hlocc.hlo.types import PrimitiveType

_INT64_MAX = np.iinfo(np.int64).max


def as_index_array(value: np.ndarray) -> np.ndarray:
    """Integer indices of any int type as int64 (u64 values past the s64 range saturate, which
    keeps them out of bounds)."""
    array = np.asarray(value)
    if array.dtype == np.uint64:
        array = np.minimum(array, _INT64_MAX)
    return array.astype(np.int64)


def _index_vectors(indices: np.ndarray, index_vector_dim: int) -> np.ndarray:
    """`indices` as int64 with the index vector dim last: shape `batch_shape + (K,)`."""
    idx = as_index_array(indices)
    if index_vector_dim == idx.ndim:
        return idx[..., None]
    return np.moveaxis(idx, index_vector_dim, -1)


def _starts(vectors: np.ndarray, index_map: Sequence[int], operand_batching: Sequence[int],
            indices_batching: Sequence[int], index_vector_dim: int, rank: int) -> list[np.ndarray]:
    """The unclamped start of every operand dim for every batch position (arrays of batch shape)."""
    batch_shape = vectors.shape[:-1]
    starts = [np.zeros(batch_shape, np.int64) for _ in range(rank)]
    for k, dim in enumerate(index_map):
        starts[dim] = vectors[..., k]
    for operand_dim, indices_dim in zip(operand_batching, indices_batching):
        axis = indices_dim if indices_dim < index_vector_dim else indices_dim - 1
        coordinate = np.arange(batch_shape[axis], dtype=np.int64)
        coordinate = coordinate.reshape([batch_shape[axis] if a == axis else 1 for a in range(len(batch_shape))])
        starts[operand_dim] = np.broadcast_to(coordinate, batch_shape)
    return starts


def _window_dims(rank: int, *excluded: Sequence[int]) -> list[int]:
    skip = {d for group in excluded for d in group}
    return [d for d in range(rank) if d not in skip]


# -- gather ------------------------------------------------------------------------------------

def gather(operand: np.ndarray, indices: np.ndarray, attrs: dict) -> np.ndarray:
    """XLA gather of `operand` at the start indices `indices` (see the module docstring)."""
    rank = operand.ndim
    index_vector_dim = attrs["index_vector_dim"]
    slice_sizes = attrs["slice_sizes"]
    operand_batching = attrs.get("operand_batching_dims", ())
    vectors = _index_vectors(indices, index_vector_dim)
    batch_shape = vectors.shape[:-1]
    starts = _starts(vectors, attrs["start_index_map"], operand_batching,
                     attrs.get("start_indices_batching_dims", ()), index_vector_dim, rank)
    window = _window_dims(rank, attrs["collapsed_slice_dims"], operand_batching)
    nb, nw = len(batch_shape), len(window)
    index = []
    for dim in range(rank):
        start = np.clip(starts[dim], 0, operand.shape[dim] - slice_sizes[dim]).reshape(batch_shape + (1,) * nw)
        if dim in window:
            w = window.index(dim)
            offset = np.arange(slice_sizes[dim], dtype=np.int64)
            start = start + offset.reshape((1,) * (nb + w) + (-1,) + (1,) * (nw - w - 1))
        index.append(start)
    window_shape = tuple(slice_sizes[d] for d in window)
    index = [np.broadcast_to(i, batch_shape + window_shape) for i in index]
    gathered = operand[tuple(index)] if rank else np.broadcast_to(operand, batch_shape + window_shape)
    return np.asarray(np.transpose(gathered, _gather_output_order(attrs["offset_dims"], nb)), order="C")


def _gather_output_order(offset_dims: Sequence[int], num_batch: int) -> list[int]:
    """For each output dim, its axis in the (batch..., window...) array."""
    rank = num_batch + len(offset_dims)
    batch_axes = iter(range(num_batch))
    return [num_batch + offset_dims.index(p) if p in offset_dims else next(batch_axes) for p in range(rank)]


# -- scatter -----------------------------------------------------------------------------------

_COMBINER_UFUNCS = {
    "add": np.add, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum,
    "or": np.bitwise_or, "and": np.bitwise_and,
}


def combiner_ufunc(comp: HloComputation, element_type: PrimitiveType) -> np.ufunc | None:
    """The numpy ufunc equal to `comp` when it is one add/multiply/maximum/minimum/or/and of its
    two parameters (add..minimum on numbers, or/and on pred and integers). Its `at` applies the
    updates one by one in order, rounding to the element type after each, like the combiner."""
    params = comp.parameters
    root = comp.root
    if len(params) != 2 or root.opcode not in _COMBINER_UFUNCS:
        return None
    if len(root.operands) != 2 or {id(o) for o in root.operands} != {id(p) for p in params}:
        return None
    if root.opcode in ("or", "and"):
        applicable = element_type.is_pred or element_type.is_integer
    else:
        applicable = not element_type.is_pred
    if not applicable:
        return None
    return _COMBINER_UFUNCS[root.opcode]


def _is_replace(comp: HloComputation, n: int) -> bool:
    """True when `comp` returns its update parameters unchanged (`x.at[i].set(u)`)."""
    params = comp.parameters
    root = comp.root
    if n == 1:
        return root is params[1]
    return (root.opcode == "tuple" and len(root.operands) == n
            and all(o is p for o, p in zip(root.operands, params[n:])))


def _scatter_targets(operand_shape: tuple[int, ...], indices: np.ndarray, update_shape: tuple[int, ...],
                     attrs: dict) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """The operand index of every update element (flat, row-major update order) and a flat mask
    of the elements whose whole window is in bounds."""
    rank = len(operand_shape)
    index_vector_dim = attrs["index_vector_dim"]
    update_window_dims = tuple(attrs["update_window_dims"])
    input_batching = attrs.get("input_batching_dims", ())
    vectors = _index_vectors(indices, index_vector_dim)
    starts = _starts(vectors, attrs["scatter_dims_to_operand_dims"], input_batching,
                     attrs.get("scatter_indices_batching_dims", ()), index_vector_dim, rank)
    window = _window_dims(rank, attrs["inserted_window_dims"], input_batching)
    sizes = [1] * rank
    for w, dim in enumerate(window):
        sizes[dim] = update_shape[update_window_dims[w]]
    valid = np.ones(vectors.shape[:-1], dtype=bool)
    for dim in range(rank):
        valid &= (starts[dim] >= 0) & (starts[dim] <= operand_shape[dim] - sizes[dim])
    index = []
    for dim in range(rank):
        full = np.expand_dims(starts[dim], update_window_dims)
        if dim in window:
            axis = update_window_dims[window.index(dim)]
            full = full + np.arange(sizes[dim], dtype=np.int64).reshape(
                [-1 if a == axis else 1 for a in range(len(update_shape))])
        index.append(np.broadcast_to(full, update_shape).ravel())
    mask = np.broadcast_to(np.expand_dims(valid, update_window_dims), update_shape).ravel()
    return tuple(index), mask


def _apply_ufunc_at(ufunc: np.ufunc, result: np.ndarray, index: tuple, values: np.ndarray) -> bool:
    """`ufunc.at` in place; False (result untouched) when numpy has no loop for the dtype."""
    try:
        with np.errstate(all="ignore"):
            ufunc.at(result, index, values)
    except TypeError:
        return False
    return True


def _last_occurrences(linear: np.ndarray, size: int) -> np.ndarray:
    """Positions of the last occurrence of every distinct value of `linear` (values < size)."""
    last = np.full(size, -1, dtype=np.int64)
    np.maximum.at(last, linear, np.arange(linear.size, dtype=np.int64))
    return last[last >= 0]


def _rounds(linear: np.ndarray) -> list[np.ndarray]:
    """Split positions 0..n-1 into rounds: round r holds, in order, the r-th occurrence of every
    repeated value of `linear`. No value repeats within a round."""
    if linear.size == 0:
        return []
    order = np.argsort(linear, kind="stable")
    ordered = linear[order]
    group_start = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    group_sizes = np.diff(np.append(group_start, ordered.size))
    occurrence = np.empty_like(order)
    occurrence[order] = np.arange(ordered.size) - np.repeat(group_start, group_sizes)
    by_round = np.argsort(occurrence, kind="stable")
    counts = np.bincount(occurrence)
    return np.split(by_round, np.cumsum(counts)[:-1])


def scatter(instr: HloInstruction, operands: Sequence[np.ndarray], indices: np.ndarray,
            updates: Sequence[np.ndarray], call: Callable[[HloComputation, list], Any]) -> list[np.ndarray]:
    """XLA scatter of `updates` into copies of `operands` (see the module docstring); `call`
    evaluates the combiner on whole arrays. Returns one array per operand."""
    attrs = instr.attrs
    comp: HloComputation = attrs["to_apply"]
    results = [np.array(o, copy=True) for o in operands]
    shape = results[0].shape
    index, mask = _scatter_targets(shape, indices, updates[0].shape, attrs)
    index = tuple(i[mask] for i in index)
    values = [np.asarray(u).ravel()[mask] for u in updates]
    if values[0].size == 0:
        return results
    n = len(results)
    ufunc = combiner_ufunc(comp, instr.operands[0].shape.element_type) if n == 1 else None
    if ufunc is not None and _apply_ufunc_at(ufunc, results[0], index, values[0]):
        return results
    linear = np.ravel_multi_index(index, shape)
    if _is_replace(comp, n):
        last = _last_occurrences(linear, results[0].size)
        for result, value in zip(results, values):
            result[tuple(i[last] for i in index)] = value[last]
        return results
    for positions in _rounds(linear):
        where = tuple(i[positions] for i in index)
        combined = call(comp, [r[where] for r in results] + [v[positions] for v in values])
        combined = combined if n > 1 else (combined,)
        for result, value in zip(results, combined):
            result[where] = value
    return results
