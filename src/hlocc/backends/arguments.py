"""The checks of a compiled program's arguments (the Python API's and the CLI's): their count, shapes
and dtypes against the entry's parameters, each named by its position (ArgumentError), never a
silent change of a value."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np

from hlocc.errors import ArgumentError, HloError
from hlocc.hlo.ir import HloModule
from hlocc.hlo.symbolic import DimExpr
from hlocc.hlo.types import UNBOUNDED, Shape, converted_array, from_dtype


def array_shape(value: Any) -> tuple[int, ...]:
    shape = getattr(value, "shape", None)
    return tuple(shape) if shape is not None else np.shape(value)


def check_arguments(module: HloModule, args: Sequence[Any], *, cast: bool = False,
                    device_arrays: bool = False) -> list[Any]:
    """Check count, shapes and dtypes of `args` against the entry parameters; return them as arrays
    of the parameter dtypes. With `cast`, arrays of another dtype are converted (used by the CLI for
    .npz inputs that store bf16/f8 as float32); without it a dtype mismatch is an error.

    A DLPack array (`__dlpack_device__`) in host memory becomes a numpy array without a copy; one
    in device memory becomes a DLPackArray (backends/cuda/dlpack.py) when `device_arrays` (a cuda
    backend) and is an error otherwise."""
    params = module.entry.parameters
    if len(args) != len(params):
        raise ArgumentError(f"'{module.name}' takes {len(params)} argument{'s' if len(params) != 1 else ''}, "
                            f"got {len(args)}")
    return [_check_one(i, p.shape, a, cast, device_arrays) for i, (p, a) in enumerate(zip(params, args))]


def _check_one(index: int, shape: Shape, value: Any, cast: bool, device_arrays: bool = False) -> Any:
    if shape.is_tuple:
        if not isinstance(value, (tuple, list)) or len(value) != len(shape.tuple_shapes):
            raise ArgumentError(f"argument {index}: expected a tuple of {len(shape.tuple_shapes)} arrays for {shape}")
        return tuple(_check_one(index, s, v, cast, device_arrays) for s, v in zip(shape.tuple_shapes, value))
    if shape.is_token:
        from hlocc.evaluator.core import TOKEN

        return TOKEN
    if not isinstance(value, np.ndarray) and hasattr(value, "__dlpack_device__"):
        from hlocc.backends.cuda.dlpack import DLPackArray, import_argument

        value = import_argument(value)
        if isinstance(value, DLPackArray):
            return _check_device_array(index, shape, value, device_arrays)
    try:
        arr = value if type(value) is np.ndarray else np.asarray(value)
    except (ValueError, TypeError) as e:  # a ragged nested list
        raise ArgumentError(f"argument {index}: not an array ({type(value).__name__}): {e}") from None
    # A dynamic dimension accepts any size up to its bound (or any size for `?`); a symbolic one
    # any size here (DynamicExecutable.bind checks the sizes against each other).
    fits = len(arr.shape) == shape.rank and all(
        a == d or isinstance(d, DimExpr) or (dyn and (d == UNBOUNDED or a <= d))
        for a, d, dyn in zip(arr.shape, shape.dims, shape.dynamic))
    if not fits and len(arr.shape) == shape.rank:
        for d, (a, bound, dyn) in enumerate(zip(arr.shape, shape.dims, shape.dynamic)):
            if dyn and isinstance(bound, int) and bound != UNBOUNDED and a > bound:
                raise ArgumentError(f"argument {index} dimension {d}: size {a} exceeds its bound {bound} "
                                    f"({shape.to_string(False)})")
    if not fits:
        raise ArgumentError(f"argument {index}: expected shape {shape.to_string(False)}, "
                            f"got an array of shape {list(arr.shape)} ({arr.dtype})")
    if arr.dtype != shape.dtype:
        # Python scalars and lists carry no dtype of their own: convert them; numpy arrays must match.
        if not (cast or not isinstance(value, np.ndarray)):
            raise ArgumentError(f"argument {index}: expected dtype {shape.element_type} ({shape.dtype}), "
                                f"got {arr.dtype}")
        try:
            out = converted_array(arr, shape.dtype)
        except ValueError as e:
            raise ArgumentError(f"argument {index}: expected dtype {shape.element_type} ({shape.dtype}), got "
                                f"{arr.dtype}{e}") from None
        arr = _check_values(index, arr, out, shape)
    return arr if arr.flags.c_contiguous else arr.copy(order="C")  # (ascontiguousarray makes 0-d 1-d)


def _check_values(index: int, arr: np.ndarray, out: np.ndarray, shape: Shape) -> np.ndarray:
    """`out`, `arr` converted (hlo/types.py `converted_array`), where the conversion changed no value:
    raw bytes read as the parameter's type pass; a float for a float (or complex) type may round (a .npz
    keeps bf16 as float32), one rule for every float type: a finite value must be below the type's
    overflow threshold and stay finite, and ±inf and NaN must stay what they are (1e40 for an f32 or a bf16,
    7 for an f4e2m1fn, inf for an f8e4m3fn, NaN for an f4e2m1fn are errors); any other conversion must give
    every value back (an int64 array of small integers for an s32). An ArgumentError names the first
    value that changed."""
    if arr.size == 0 or arr.dtype.kind == "V" and not _is_float(arr.dtype):
        return out
    if _is_float(arr.dtype) and _is_float(out.dtype):  # (a complex for a real type is refused before)
        same = np.ones(arr.shape, bool)
        limit = _overflow_threshold(np.real(out[:0]).dtype)
        for part in (np.real, np.imag) if arr.dtype.kind == "c" else (np.real,):
            a, b = part(arr).astype(np.float64), part(out).astype(np.float64)
            finite = np.isfinite(a)
            same &= np.where(finite, (np.abs(a) < limit) & np.isfinite(b), (a == b) | (np.isnan(a) & np.isnan(b)))
    elif arr.dtype.kind in "iu" and out.dtype.kind in "iu":  # by range: a round trip wraps both ways (u32 → s32)
        info = np.iinfo(out.dtype)
        same = (arr >= info.min) & (arr <= info.max)
    else:
        with np.errstate(all="ignore"):
            back = (np.real(out) if arr.dtype.kind != "c" else out).astype(arr.dtype)
        same = (back == arr) | (np.isnan(arr) & np.isnan(back)) if arr.dtype.kind in "fc" else back == arr
    if not np.all(same):
        where = np.unravel_index(int(np.argmin(same)), arr.shape) if arr.ndim else ()
        raise ArgumentError(f"argument {index}: expected dtype {shape.element_type} ({shape.dtype}), got {arr.dtype} "
                            f"whose value {arr[where].item()!r} at index {[int(i) for i in where]} it cannot hold")
    return out


def _overflow_threshold(dtype: np.dtype) -> float:
    """The magnitude from which a finite value rounds past `dtype`'s largest finite one (to inf, to NaN, or
    saturated where the type has neither): that value plus half the step below it."""
    top = np.array(ml_dtypes.finfo(dtype).max, dtype)
    below = (top.view(f"u{dtype.itemsize}") - 1).view(dtype)
    return float(top) + (float(top) - float(below)) / 2


def _is_float(dtype: np.dtype) -> bool:
    """A real or complex floating-point type, numpy's or ml_dtypes' (whose bf16, f8 and f4 are numpy kind 'V'
    or 'f')."""
    if dtype.kind in "fc":
        return True
    try:
        return from_dtype(dtype).is_float
    except HloError:
        return False


def _check_device_array(index: int, shape: Shape, value: Any, device_arrays: bool) -> Any:
    if not device_arrays:
        raise ArgumentError(f"argument {index}: the array is in {value.device_name} memory; this backend takes "
                            "host arrays (copy it to the host, or use --backend cuda)")
    # any size for a symbolic dimension (the plan's shape function checks them), none for a bounded one
    fits = len(value.shape) == shape.rank and all(a == d or isinstance(d, DimExpr)
                                                  for a, d in zip(value.shape, shape.dims))
    if not fits or any(dyn and not isinstance(d, DimExpr) for d, dyn in zip(shape.dims, shape.dynamic)):
        raise ArgumentError(f"argument {index}: expected shape {shape.to_string(False)}, "
                            f"got an array of shape {list(value.shape)} ({value.dtype}) in {value.device_name} memory")
    if value.dtype != shape.dtype:
        raise ArgumentError(f"argument {index}: expected dtype {shape.element_type} ({shape.dtype}), got "
                            f"{value.dtype} in {value.device_name} memory (device arrays are not converted)")
    return value


__all__ = ["array_shape", "check_arguments"]
