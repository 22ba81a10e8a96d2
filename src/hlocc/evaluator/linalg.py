"""Reference evaluation of the linear-algebra and spectral ops: cholesky, triangular-solve, fft.

All are batched over the leading dimensions and loop in Python only over one matrix dimension
(each step vectorised over the batch). Floats narrower than f32 are computed in f32, f32 in f64
(rounded once at the end), f64/complex128 natively.
"""

from __future__ import annotations

import numpy as np

from hlocc.errors import UnsupportedError
from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.opcodes import register_evaluator
from hlocc.hlo.types import from_dtype


def _work_dtype(dtype: np.dtype) -> np.dtype:
    ptype = from_dtype(dtype)
    if ptype.is_complex:
        return np.dtype(np.complex128)
    return np.dtype(np.float64)


def cholesky_lower(a: np.ndarray) -> np.ndarray:
    """Lower Cholesky factors of the batch of matrices `a` (..., n, n), reading only the lower
    triangle; the strict upper triangle of the result is zero. A matrix whose factorisation
    takes the square root of a negative (or NaN) pivot becomes all NaN, as XLA's expander does."""
    n = a.shape[-1]
    low = np.zeros_like(a)
    failed = np.zeros(a.shape[:-2], dtype=bool)
    with np.errstate(all="ignore"):
        for j in range(n):
            row = low[..., j, :j]
            pivot = a[..., j, j] - np.sum(row * np.conj(row), axis=-1)
            if np.iscomplexobj(a):
                root = np.sqrt(pivot.real)
                failed |= np.isnan(root)
                diag = root.astype(a.dtype)
            else:
                diag = np.sqrt(pivot)
                failed |= np.isnan(diag)
            low[..., j, j] = diag
            below = a[..., j + 1:, j] - np.einsum("...ik,...k->...i", low[..., j + 1:, :j], np.conj(row))
            low[..., j + 1:, j] = below / diag[..., None]
    low[failed] = np.nan
    return low


@register_evaluator("cholesky")
def evaluate_cholesky(instr: HloInstruction, operands: list, ev):
    """cholesky(a), lower=L (default false): L → lower l with a = l·lᴴ reading a's lower
    triangle; otherwise upper u with a = uᴴ·u reading a's upper triangle. The other triangle of
    the result is zero; a non-positive-definite matrix gives an all-NaN result matrix."""
    a = np.asarray(operands[0])
    work = a.astype(_work_dtype(a.dtype))
    lower = bool(instr.attrs.get("lower", False))
    if not lower:
        work = np.swapaxes(work, -1, -2)
    factor = cholesky_lower(work)
    if not lower:
        factor = np.swapaxes(factor, -1, -2)
    with np.errstate(all="ignore"):
        return factor.astype(instr.shape.dtype)


def _solve_lower(t: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Forward substitution of t·x = b for lower-triangular t (..., m, m), b (..., m, n)."""
    m = t.shape[-1]
    x = np.zeros(np.broadcast_shapes(t.shape[:-2], b.shape[:-2]) + b.shape[-2:], dtype=b.dtype)
    for i in range(m):
        acc = b[..., i, :] - np.einsum("...k,...kn->...n", t[..., i, :i], x[..., :i, :])
        x[..., i, :] = acc / t[..., i, i][..., None]
    return x


@register_evaluator("triangular-solve")
def evaluate_triangular_solve(instr: HloInstruction, operands: list, ev):
    """triangular-solve(a, b), left_side, lower, unit_diagonal, transpose_a: solves
    op(a)·x = b (left_side) or x·op(a) = b for x, where op is identity, transpose or adjoint,
    and a is read only in its lower (lower=true) or upper triangle, with ones assumed on the
    diagonal when unit_diagonal. A zero pivot yields inf/NaN as plain division does."""
    a, b = (np.asarray(o) for o in operands)
    work = np.result_type(_work_dtype(a.dtype), _work_dtype(b.dtype))
    a, b = a.astype(work), b.astype(work)
    m = a.shape[-1]
    lower = bool(instr.attrs.get("lower", False))
    tri = np.tril(a) if lower else np.triu(a)
    if instr.attrs.get("unit_diagonal", False):
        tri = tri * (1 - np.eye(m, dtype=work)) + np.eye(m, dtype=work)
    transpose = instr.attrs.get("transpose_a", "NO_TRANSPOSE")
    if transpose not in ("NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"):
        raise UnsupportedError(f"unknown transpose_a '{transpose}'")
    if transpose != "NO_TRANSPOSE":
        tri = np.swapaxes(tri, -1, -2)
        tri = np.conj(tri) if transpose == "ADJOINT" else tri
        lower = not lower
    if not instr.attrs.get("left_side", False):
        # x·T = b  ⇔  Tᵀ·xᵀ = bᵀ
        tri, b, lower = np.swapaxes(tri, -1, -2), np.swapaxes(b, -1, -2), not lower
    with np.errstate(all="ignore"):
        if lower:
            x = _solve_lower(tri, b)
        else:  # reverse rows and columns: an upper-triangular system becomes a lower one
            x = _solve_lower(tri[..., ::-1, ::-1], b[..., ::-1, :])[..., ::-1, :]
    if not instr.attrs.get("left_side", False):
        x = np.swapaxes(x, -1, -2)
    with np.errstate(all="ignore"):
        return np.ascontiguousarray(x).astype(instr.shape.dtype)


@register_evaluator("fft")
def evaluate_fft(instr: HloInstruction, operands: list, ev):
    """fft(x), fft_type, fft_length=L over the last len(L) dims: FFT (complex→complex), IFFT
    (inverse, scaled by 1/prod(L)), RFFT (real→complex, last dim L[-1]//2 + 1), IRFFT
    (complex→real, last dim L[-1], the input's last dim holding L[-1]//2 + 1 coefficients).
    Computed in double precision and rounded to the result type (c64/f32 for 32-bit inputs)."""
    x = np.asarray(operands[0])
    lengths = tuple(int(n) for n in instr.attrs["fft_length"])
    axes = tuple(range(x.ndim - len(lengths), x.ndim))
    kind = instr.attrs["fft_type"]
    if kind == "FFT":
        y = np.fft.fftn(x, s=lengths, axes=axes)
    elif kind == "IFFT":
        y = np.fft.ifftn(x, s=lengths, axes=axes)
    elif kind == "RFFT":
        y = np.fft.rfftn(x.astype(np.float64), s=lengths, axes=axes)
    elif kind == "IRFFT":
        y = np.fft.irfftn(x, s=lengths, axes=axes)
    else:
        raise UnsupportedError(f"unknown fft_type '{kind}'")
    return y.astype(instr.shape.dtype)
