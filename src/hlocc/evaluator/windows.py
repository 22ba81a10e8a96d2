"""Windowed views of arrays for the reference evaluator's window ops (reduce-window,
select-and-scatter, convolution).

XLA's `Window` describes, per dimension, a window `size`, a `stride` between window positions,
low/high edge padding (negative values remove elements), base (lhs) dilation, which puts
`lhs_dilate - 1` holes between neighbouring input elements, window (rhs) dilation, which puts
`rhs_dilate - 1` holes between the window's taps, and `reversal`, which reverses the taps.

`window_view` realises that description on numpy: the input is padded (edges and holes hold
`fill`) and a strided view of shape `output_dims + window_sizes` is returned, so
`view[o..., w...]` is the value that window position `o` sees at tap `w`. Pure numpy; touches
nothing outside this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hlocc.hlo.attributes import WindowDim
from hlocc.hlo.types import raw_elements


def pad_array(x: np.ndarray, fill: Any, lo: Sequence[int], hi: Sequence[int],
              interior: Sequence[int]) -> np.ndarray:
    """XLA `pad` semantics: `interior[i]` copies of `fill` between neighbouring elements, then
    `lo[i]`/`hi[i]` copies at the edges; negative edge padding removes elements."""
    dilated_shape = tuple(d + max(d - 1, 0) * k for d, k in zip(x.shape, interior))
    if any(interior):
        dilated = np.full(dilated_shape, fill, dtype=x.dtype)
        dilated[tuple(slice(None, None, k + 1) for k in interior)] = x
    else:
        dilated = x
    out_shape = tuple(max(0, d + a + b) for d, a, b in zip(dilated_shape, lo, hi))
    out = np.full(out_shape, fill, dtype=x.dtype)
    src, dst = [], []
    for d, a, n in zip(dilated_shape, lo, out_shape):
        s0, d0 = max(0, -a), max(0, a)
        count = max(0, min(d - s0, n - d0))
        src.append(slice(s0, s0 + count))
        dst.append(slice(d0, d0 + count))
    out[tuple(dst)] = dilated[tuple(src)]
    return out


def window_output_dims(base_dims: Sequence[int], window: Sequence[WindowDim]) -> tuple[int, ...]:
    """Number of window positions per dimension (XLA's windowed output shape)."""
    dims = []
    for d, w in zip(base_dims, window):
        padded = (d + (d - 1) * (w.lhs_dilate - 1) if d else 0) + w.pad_lo + w.pad_hi
        extent = (w.size - 1) * w.rhs_dilate + 1
        dims.append(0 if padded < extent or w.size == 0 else (padded - extent) // w.stride + 1)
    return tuple(dims)


def window_view(x: np.ndarray, window: Sequence[WindowDim], fill: Any) -> np.ndarray:
    """A read-only array of shape `output_dims + window sizes` whose `[o..., w...]` element is
    the (padded, dilated) input value that window position `o` sees at tap `w`; padding and
    base-dilation holes read `fill`. Window reversal reverses the tap axes."""
    rank = x.ndim
    sizes = tuple(w.size for w in window)
    out_dims = window_output_dims(x.shape, window)
    if 0 in out_dims or 0 in sizes:
        return np.full(out_dims + sizes, fill, dtype=x.dtype)
    padded = pad_array(x, fill, [w.pad_lo for w in window], [w.pad_hi for w in window],
                       [w.lhs_dilate - 1 for w in window])
    extents = tuple((w.size - 1) * w.rhs_dilate + 1 for w in window)
    view = np.lib.stride_tricks.sliding_window_view(raw_elements(padded), extents).view(padded.dtype)
    index = tuple(slice(0, n * w.stride, w.stride) for n, w in zip(out_dims, window))
    index += tuple(slice(None, None, -w.rhs_dilate) if w.reversal else slice(None, None, w.rhs_dilate)
                   for w in window)
    view = view[index]
    assert view.shape == out_dims + sizes, (view.shape, out_dims, sizes, rank)
    return view
