"""A Fortran BLAS gemm (`sgemm_`/`dgemm_`) called through ctypes on raw addresses, for the
runtime's gemm and convolution library calls (runtime/library.py), where the process has one
that is faster than numpy's: `use_library(path)` binds it (the PyTorch frontend binds the MKL in
libtorch_cpu, which exports the LP64 `sgemm_`; XLA:CPU calls MKL/oneDNN the same way). Unbound
(the default), every gemm goes through numpy's matmul as before.

A `GemmLayout` is how one row-major product out[m, n] = a[m, k] @ w[k, n] on strided views maps
onto a column-major gemm call, worked out once from the views' strides: C = A·W
row-major is Cᵀ = Wᵀ·Aᵀ column-major, so the call is sgemm(opW, opA, n, m, k, 1, W, ldw, A, lda,
0, C, ldc), each operand 'N' when its rows are contiguous and 'T' when its columns are; an output
whose columns are contiguous is the transposed problem (outᵀ = wᵀ·aᵀ). A view with neither unit
stride (or an unaligned one) has no layout: numpy's matmul runs it, as it runs batched products.

Sizes past 2³¹ elements are left to numpy (the LP64 interface's ints are 32-bit).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

_GEMMS: dict[np.dtype, tuple] = {}  # dtype -> (the gemm, the addresses of alpha 1 and beta 0)
_KEEP: list = []  # the alpha/beta scalars whose addresses the calls pass (two per bound library)
_INT_MAX = 2**31 - 1


def use_library(path: str | None) -> bool:
    """Bind `sgemm_`/`dgemm_` of the shared library at `path` (None: unbind, numpy's matmul runs
    every gemm); False when it has neither (nothing changes). A library that exports only the
    ILP64 names of numpy's bundled OpenBLAS (`scipy_sgemm_64_`, 64-bit integer arguments) is bound
    through those."""
    if path is None:
        _GEMMS.clear()
        return True
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return False
    found = {}
    for name, dtype, scalar in (("sgemm", np.dtype(np.float32), ctypes.c_float),
                                ("dgemm", np.dtype(np.float64), ctypes.c_double)):
        function, integer = next(((getattr(lib, symbol), integer) for symbol, integer in
                                  ((f"{name}_", ctypes.c_int), (f"scipy_{name}_64_", ctypes.c_int64))
                                  if hasattr(lib, symbol)), (None, None))
        if function is None:
            continue
        function.restype = None
        function.argtypes = [ctypes.c_void_p] * 13
        one, zero = scalar(1.0), scalar(0.0)
        _KEEP.extend((one, zero))
        found[dtype] = (function, ctypes.addressof(one), ctypes.addressof(zero), integer)
    if not found:
        return False
    _GEMMS.clear()
    _GEMMS.update(found)
    return True


def use_numpy_openblas() -> bool:
    """Bind the OpenBLAS numpy's wheel bundles (numpy.libs/libscipy_openblas64_*: the library
    numpy's matmul calls, so the same kernels and results, without numpy's per-call work) unless a
    library is bound already; whether one is bound after."""
    if _GEMMS:
        return True
    import glob
    import os

    for path in sorted(glob.glob(os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs",
                                              "libscipy_openblas*.so*"))):
        if use_library(path):
            return True
    return False


def bound() -> bool:
    """Whether a BLAS library is bound (`use_library`)."""
    return bool(_GEMMS)


_TRANS = {flag: ctypes.c_char(flag) for flag in (b"N", b"T")}
_TRANS_ADDRESS = {flag: ctypes.addressof(c) for flag, c in _TRANS.items()}


def _operand(rows: int, cols: int, strides: tuple[int, int], itemsize: int) -> tuple[bytes, int] | None:
    """A row-major [rows, cols] operand with byte `strides` as (op, ld) of its transpose in
    column-major terms ('N': its rows are contiguous, ld the row stride; 'T': its columns are),
    or None. A dimension of size 1 takes any stride."""
    row, col = (s // itemsize if s % itemsize == 0 else -1 for s in strides)
    if cols == 1 or col == 1:
        ld = row if rows > 1 else cols
        if ld >= max(1, cols):
            return b"N", ld
    if rows == 1 or row == 1:
        ld = col if cols > 1 else rows
        if ld >= max(1, rows):
            return b"T", ld
    return None


@dataclass(frozen=True)
class GemmLayout:
    """One product's call (module doc): `args` the 13 Fortran arguments with the three matrix
    addresses left as 0 (slots 6, 8, 11); `swap`: slot 6 takes a and slot 8 w (the transposed
    problem), else w and a."""

    function: object
    args: tuple
    swap: bool
    ints: tuple  # the C ints whose addresses `args` holds (alive as long as the layout)

    def run(self, a_address: int, w_address: int, out_address: int) -> None:
        args = list(self.args)
        args[6], args[8] = (a_address, w_address) if self.swap else (w_address, a_address)
        args[11] = out_address
        self.function(*args)


def gemm_layout(a: np.ndarray, w: np.ndarray, out: np.ndarray) -> GemmLayout | None:
    """The call of out = a @ w on these 2-D views ([m, k] @ [k, n] -> [m, n]), or None (numpy's
    matmul runs it): no library bound for their dtype, mixed dtypes, or strides BLAS cannot take.
    Batched products are left to numpy: at the batched sizes of small models (attention's
    [64 × 16×16×16], a CNN's im2col products) MKL's batched call and a loop of calls both measured
    1.2-1.4x slower than numpy's matmul."""
    dtype = out.dtype
    if dtype not in _GEMMS or a.dtype != dtype or w.dtype != dtype or not a.ndim == w.ndim == out.ndim == 2:
        return None
    function, one, zero, integer = _GEMMS[dtype]
    (m, k), (k2, n) = a.shape, w.shape
    if k != k2 or out.shape != (m, n) or max(m, n, k) > _INT_MAX or 0 in (m, n, k):
        return None
    size = dtype.itemsize
    swap = False
    out_op = _operand(m, n, out.strides, size)
    if out_op is None or out_op[0] != b"N":  # columns contiguous: outᵀ = wᵀ · aᵀ
        out_op = _operand(n, m, out.strides[::-1], size)
        if out_op is None or out_op[0] != b"N":
            return None
        a, w, m, n = w.T, a.T, n, m
        swap = True
    op_w, op_a = _operand(k, n, w.strides, size), _operand(m, k, a.strides, size)
    if op_w is None or op_a is None:
        return None
    # slot 6 takes w and slot 8 a (of the problem as swapped: unswapped, the caller's w and a)
    ints = tuple(integer(v) for v in (n, m, k, op_w[1], op_a[1], out_op[1]))
    n_at, m_at, k_at, ldw_at, lda_at, ldc_at = (ctypes.addressof(i) for i in ints)
    args = (_TRANS_ADDRESS[op_w[0]], _TRANS_ADDRESS[op_a[0]], n_at, m_at, k_at, one, 0, ldw_at, 0, lda_at, zero, 0,
            ldc_at)
    return GemmLayout(function, args, swap, ints)


__all__ = ["GemmLayout", "bound", "gemm_layout", "use_library", "use_numpy_openblas"]
