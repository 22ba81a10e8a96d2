"""Comparing results with references (the corpus tolerance policy) and converting results to what
numpy's .npz can store. Shared by the CLI (`hlocc run --expected`), the tests and the benchmarks."""

from __future__ import annotations

import numpy as np


def storable(value) -> np.ndarray:
    """The array as numpy can store it in .npz: bf16/f8 widened to float32, sub-byte ints to int8/uint8."""
    arr = np.asarray(value)
    if arr.dtype.kind == "V" or arr.dtype.type.__module__.startswith("ml_dtypes"):
        name = arr.dtype.name
        if name.startswith(("int", "uint")):
            return arr.astype(np.uint8 if name.startswith("uint") else np.int8)
        return arr.astype(np.float32)
    return arr



def compare_arrays(ref, got, rtol: float, atol: float) -> str | None:
    """None when `got` matches `ref` under the corpus policy (exact for integers and preds; for
    floats, equal NaN positions and infinities and |got-ref| <= atol + rtol*|ref|), else why not.
    bf16 and f8 (ml_dtypes, numpy kind 'V') are floats too: widened like `got`, not compared bit
    for bit (a one-ulp bf16 rounding difference once failed a 2e-2 tolerance)."""
    ref = storable(ref)
    got = storable(got)
    if ref.shape != got.shape:
        return f"shape {list(got.shape)} != expected {list(ref.shape)}"
    if ref.dtype.kind not in "fc":
        bad = ref != got.astype(ref.dtype)
        return f"{int(bad.sum())} of {ref.size} elements differ" if bad.any() else None
    if ref.dtype.kind == "c":  # each part on its own (inf+nanj is neither NaN nor inf as a whole),
        r = ref.astype(np.complex128)  # within the tolerance of the complex magnitude
        g = got.astype(np.complex128)
        scale = np.abs(np.where(np.isfinite(r), r, 0))
        for part, name in ((np.real, "real"), (np.imag, "imaginary")):
            why = _compare_floats(part(r), part(g), rtol, atol, scale)
            if why is not None:
                return f"{name} parts: {why}"
        return None
    r = ref.astype(np.float64)
    return _compare_floats(r, got.astype(np.float64), rtol, atol, np.abs(r))


def _compare_floats(r: np.ndarray, g: np.ndarray, rtol: float, atol: float, scale: np.ndarray) -> str | None:
    """compare_arrays on float64 arrays; `scale` is the magnitude rtol is relative to."""
    if not np.array_equal(np.isnan(r), np.isnan(g)):
        return "NaN positions differ"
    inf = np.isinf(r)
    if not np.array_equal(r[inf], g[inf]):
        return "infinities differ"
    fin = np.isfinite(r)
    err = np.abs(g[fin] - r[fin])
    bound = atol + rtol * scale[fin]
    if np.any(err > bound) or not np.all(np.isfinite(g[fin])):
        worst = float(np.max(err - bound)) if err.size else 0.0
        return f"{int(np.sum(err > bound))} of {r.size} elements out of tolerance (worst excess {worst:.3g})"
    return None
