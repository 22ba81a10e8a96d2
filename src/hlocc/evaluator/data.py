"""Reference evaluation of the data-movement ops: constants, shape changes (broadcast, reshape,
bitcast, transpose, dynamic-reshape), slicing (slice, dynamic-slice, dynamic-update-slice, pad,
concatenate, reverse), iota, gather/scatter (in gather_scatter.py), tuples and dynamic-dimension
queries. Semantics follow XLA's operation semantics. Results may be views of operands (reshape,
transpose, slice); no evaluation ever writes into an operand, the in-place-looking ops
(dynamic-update-slice, scatter) write into a copy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hlocc.errors import UnsupportedError
from hlocc.evaluator.core import Evaluator
from hlocc.evaluator.gather_scatter import as_index_array, gather, scatter
from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.opcodes import register_evaluator
from hlocc.hlo.types import Shape


def _scalar_int(value: Any) -> int:
    """A scalar index of any integer type as a Python int."""
    return int(as_index_array(value).reshape(()))


def _literal_value(literal: Any, shape: Shape) -> Any:
    if shape.is_tuple:
        return tuple(_literal_value(v, s) for v, s in zip(literal, shape.tuple_shapes))
    if not shape.is_array:
        return literal
    return np.asarray(literal, dtype=shape.dtype).reshape(shape.dims)


@register_evaluator("constant")
def eval_constant(instr: HloInstruction, operands: list, ev: Evaluator) -> Any:
    """The literal, as an array of the declared element type and dims (tuples recursively)."""
    return _literal_value(instr.literal, instr.shape)


@register_evaluator("broadcast")
def eval_broadcast(instr: HloInstruction, operands: list, ev: Evaluator) -> np.ndarray:
    """Operand dim i becomes result dim `dimensions[i]`; every other result dim replicates."""
    operand = operands[0]
    dims = tuple(instr.attrs.get("dimensions", ()))
    order = sorted(range(len(dims)), key=lambda i: dims[i])
    aligned = np.transpose(operand, order) if order != list(range(len(dims))) else operand
    placed = [1] * instr.shape.rank
    for i in order:
        placed[dims[i]] = operand.shape[i]
    return np.array(np.broadcast_to(aligned.reshape(placed), instr.shape.dims))


@register_evaluator("reshape")
def eval_reshape(instr: HloInstruction, operands: list, ev: Evaluator) -> np.ndarray:
    """Row-major reshape of the logical array to the result dims."""
    return operands[0].reshape(instr.shape.dims)


@register_evaluator("dynamic-reshape")
def eval_dynamic_reshape(instr: HloInstruction, operands: list, ev: Evaluator) -> np.ndarray:
    """Row-major reshape to the sizes given by the scalar operands 1..rank."""
    return operands[0].reshape([_scalar_int(s) for s in operands[1:]])


def _physical(array: np.ndarray, shape: Shape) -> np.ndarray:
    """The elements of `array` in the memory order of `shape`'s layout (major to minor), flat."""
    major_to_minor = tuple(reversed(shape.minor_to_major))
    return np.ascontiguousarray(np.transpose(array, major_to_minor)).ravel()


def _from_physical(flat: np.ndarray, shape: Shape) -> np.ndarray:
    """Inverse of `_physical`: the logical array of `shape` whose memory holds `flat`."""
    major_to_minor = tuple(reversed(shape.minor_to_major))
    stored = flat.reshape([shape.dims[d] for d in major_to_minor])
    return np.transpose(stored, np.argsort(major_to_minor))


@register_evaluator("bitcast")
def eval_bitcast(instr: HloInstruction, operands: list, ev: Evaluator) -> np.ndarray:
    """Reinterpret the operand's buffer as the result shape: its elements in the operand layout's
    memory order are laid out in the result layout's memory order (with default layouts, a
    row-major reshape). A change of element type reinterprets the bytes."""
    operand_shape = instr.operands[0].shape
    dtype = instr.shape.dtype
    if operand_shape.rank == 0 and instr.shape.rank == 0 and np.ndim(operands[0]) > 0 \
            and operand_shape.element_type.bits == instr.shape.element_type.bits:
        # A scalar computation called on whole arrays (a sort comparator: XLA's optimized modules
        # bitcast f32 to s32 there): each element's bits, reinterpreted
        return np.ascontiguousarray(operands[0]).view(dtype)
    flat = _physical(operands[0], operand_shape)
    if flat.dtype != dtype:
        if operand_shape.element_type.bits % 8 or instr.shape.element_type.bits % 8:
            raise UnsupportedError(f"bitcast between sub-byte types {operand_shape.element_type} and "
                                   f"{instr.shape.element_type} (instruction '{instr.name}')")
        flat = flat.view(dtype)
    return _from_physical(flat, instr.shape)


@register_evaluator("transpose")
def eval_transpose(instr: HloInstruction, operands: list, ev: Evaluator) -> np.ndarray:
    """Result dim i is operand dim `dimensions[i]`."""
    return np.transpose(operands[0], instr.attrs["dimensions"])


@register_evaluator("slice")
def eval_slice(instr: HloInstruction, operands: list, ev: Evaluator) -> np.ndarray:
    """Elements start, start+stride, ... below limit in every dim."""
    return operands[0][tuple(slice(d.start, d.limit, d.stride) for d in instr.attrs["slice"])]


def _clamped_starts(operand_dims: Sequence[int], sizes: Sequence[int], starts: Sequence[Any]) -> list[int]:
    """XLA's rule: each start is clamped to [0, operand_dim - size] so the window is in bounds."""
    if len(starts) == 1 and np.ndim(starts[0]) == 1:  # legacy form: one index vector operand
        starts = list(starts[0])
    return [min(max(_scalar_int(s), 0), d - n) for s, d, n in zip(starts, operand_dims, sizes)]


@register_evaluator("dynamic-slice")
def eval_dynamic_slice(instr: HloInstruction, operands: list, ev: Evaluator) -> np.ndarray:
    """The window of `dynamic_slice_sizes` at the (clamped) start scalars operands[1:]."""
    operand = operands[0]
    sizes = instr.attrs["dynamic_slice_sizes"]
    starts = _clamped_starts(operand.shape, sizes, operands[1:])
    return operand[tuple(slice(s, s + n) for s, n in zip(starts, sizes))]


@register_evaluator("dynamic-update-slice")
def eval_dynamic_update_slice(instr: HloInstruction, operands: list, ev: Evaluator) -> np.ndarray:
    """A copy of operand 0 with update (operand 1) written at the (clamped) start scalars."""
    result = np.array(operands[0], copy=True)
    update = operands[1]
    starts = _clamped_starts(result.shape, update.shape, operands[2:])
    result[tuple(slice(s, s + n) for s, n in zip(starts, update.shape))] = update
    return result


@register_evaluator("pad")
def eval_pad(instr: HloInstruction, operands: list, ev: Evaluator) -> np.ndarray:
    """Per dim: `interior` padding values between neighbouring elements, then `lo`/`hi` values at
    the edges; a negative `lo`/`hi` removes that many elements from the edge instead. The padding
    value is the scalar operand 1."""
    operand, value = operands
    padding = instr.attrs["padding"]
    stretched = [(n - 1) * (p.interior + 1) + 1 if n else 0 for n, p in zip(operand.shape, padding)]
    grown = [max(p.lo, 0) + n + max(p.hi, 0) for n, p in zip(stretched, padding)]
    result = np.full(grown, value, dtype=operand.dtype)
    result[tuple(slice(max(p.lo, 0), max(p.lo, 0) + n, p.interior + 1)
                 for n, p in zip(stretched, padding))] = operand
    return result[tuple(slice(max(-p.lo, 0), g - max(-p.hi, 0)) for g, p in zip(grown, padding))]


@register_evaluator("concatenate")
def eval_concatenate(instr: HloInstruction, operands: list, ev: Evaluator) -> np.ndarray:
    """The operands joined along `dimensions[0]`."""
    return np.concatenate(operands, axis=instr.attrs["dimensions"][0])


@register_evaluator("reverse")
def eval_reverse(instr: HloInstruction, operands: list, ev: Evaluator) -> np.ndarray:
    """The operand with the order of elements reversed along each dim in `dimensions`."""
    return np.flip(operands[0], axis=tuple(instr.attrs["dimensions"]))


_IOTA_CHUNK = 1 << 20


@register_evaluator("iota")
def eval_iota(instr: HloInstruction, operands: list, ev: Evaluator) -> np.ndarray:
    """Element value = its index along `iota_dimension`, converted to the element type."""
    dims = instr.shape.dims
    axis = instr.attrs["iota_dimension"]
    n = dims[axis]
    line = np.empty(n, instr.shape.dtype)
    for start in range(0, n, _IOTA_CHUNK):  # (the int64 indices of a whole long line were twice its f32 size)
        line[start:start + _IOTA_CHUNK] = np.arange(start, min(n, start + _IOTA_CHUNK)).astype(instr.shape.dtype)
    line = line.reshape([dims[axis] if a == axis else 1 for a in range(len(dims))])
    return np.array(np.broadcast_to(line, dims))


@register_evaluator("gather")
def eval_gather(instr: HloInstruction, operands: list, ev: Evaluator) -> np.ndarray:
    """See gather_scatter.gather."""
    return gather(operands[0], operands[1], instr.attrs)


@register_evaluator("scatter")
def eval_scatter(instr: HloInstruction, operands: list, ev: Evaluator) -> Any:
    """See gather_scatter.scatter; N operands/updates give an N-tuple when N > 1."""
    n = (len(operands) - 1) // 2
    results = scatter(instr, operands[:n], operands[n], operands[n + 1:], ev.call)
    return tuple(results) if instr.shape.is_tuple else results[0]


@register_evaluator("tuple")
def eval_tuple(instr: HloInstruction, operands: list, ev: Evaluator) -> tuple:
    return tuple(operands)


@register_evaluator("get-tuple-element")
def eval_get_tuple_element(instr: HloInstruction, operands: list, ev: Evaluator) -> Any:
    return operands[0][instr.attrs["index"]]


@register_evaluator("get-dimension-size")
def eval_get_dimension_size(instr: HloInstruction, operands: list, ev: Evaluator) -> np.ndarray:
    """The (run-time) size of dim `dimensions[0]` as an s32 scalar."""
    return np.array(operands[0].shape[instr.attrs["dimensions"][0]], dtype=np.int32)


@register_evaluator("set-dimension-size")
def eval_set_dimension_size(instr: HloInstruction, operands: list, ev: Evaluator) -> np.ndarray:
    """Values unchanged: the evaluator works on static (bound-sized) arrays."""
    return operands[0]
