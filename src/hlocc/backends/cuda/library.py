"""Library gemms on a device: a dot_general as ONE strided batched gemm in cuBLAS's column-major
terms (`plan_gemm`), run by cuBLAS through nvmath-python's low-level bindings (`CublasGemm`) on a
CudaDevice, or by numpy over the same pointers, strides and transposes (`gemm_numpy`) on the
SimulatedDevice, which is how the mapping is tested without a GPU.

Semantics are runtime/library.py's (XLA's DotGeneral): out's dims are batch, lhs free, rhs free;
operands are computed in the evaluator's `contraction_dtype` (bf16/f16 accumulate in f32, rounded
once to the output type: cuBLAS's COMPUTE_32F with 16-bit inputs does exactly that).

The mapping. Each operand must be, in its physical (layout) order and ignoring dims of size 1, the
batch dims (in the dot's batch order) followed by its two groups of dims, either group first: the
lhs as [M, K] or [K, M], the rhs as [K, N] or [N, K], the output as [M, N] or [N, M]; every group
is then one contiguous matrix per batch. With C row-major (physical [M, N]) cuBLAS computes
Cᵀ = Rᵀ·Lᵀ (column-major Cᵀ is row-major C), otherwise C = L·R; an operand stored in the other
order than the column-major one cuBLAS wants is passed transposed. Dots that do not map (a batch
dim that is not outermost, contracting dims interleaved with free ones, integer or mixed types,
an empty dimension) get no plan: the runtime computes them on the host ("gemm (host)" in stats).
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from hlocc.hlo.types import Shape, as_strided

# cudaDataType_t (library_types.h; a stable ABI) of the types cuBLAS's gemmEx takes here.
CUDA_DATA_TYPE = {np.dtype(np.float16): 2, np.dtype(ml_dtypes.bfloat16): 14, np.dtype(np.float32): 0,
                  np.dtype(np.float64): 1, np.dtype(np.complex64): 4, np.dtype(np.complex128): 5}

# (operand dtype, output dtype) → compute dtype (also alpha's and beta's type).
_COMPUTE = {
    (np.dtype(np.float32), np.dtype(np.float32)): np.dtype(np.float32),
    (np.dtype(np.float64), np.dtype(np.float64)): np.dtype(np.float64),
    (np.dtype(np.complex64), np.dtype(np.complex64)): np.dtype(np.complex64),
    (np.dtype(np.complex128), np.dtype(np.complex128)): np.dtype(np.complex128),
    **{(np.dtype(t), np.dtype(o)): np.dtype(np.float32)
       for t in (np.float16, ml_dtypes.bfloat16) for o in (t, np.float32)},
}


@dataclass(frozen=True)
class GemmPlan:
    """One cublasGemmStridedBatchedEx: X = op(P)·op(Q) for `batch` column-major m×n matrices X.
    P is the dot's lhs (`p_is_lhs`) or, when the output is row-major, its rhs. Leading dimensions
    and batch strides are in elements."""

    p_is_lhs: bool
    trans_p: bool
    trans_q: bool
    m: int
    n: int
    k: int
    ldp: int
    ldq: int
    ldc: int
    stride_p: int
    stride_q: int
    stride_c: int
    batch: int
    operand_dtype: np.dtype
    output_dtype: np.dtype
    compute_dtype: np.dtype


def _prod(values) -> int:
    return int(np.prod(values, dtype=np.int64))


def _group_order(shape: Shape, batch: Sequence[int], first: Sequence[int], second: Sequence[int]) -> bool | None:
    """True when `shape` is physically [batch, first, second], False for [batch, second, first],
    None otherwise; dims of size 1 do not count (they take no room)."""
    physical = [d for d in reversed(shape.minor_to_major) if shape.dims[d] != 1]
    keep = [d for d in batch if shape.dims[d] != 1]
    a = [d for d in first if shape.dims[d] != 1]
    b = [d for d in second if shape.dims[d] != 1]
    if physical == keep + a + b:
        return True
    if physical == keep + b + a:
        return False
    return None


def plan_gemm(lhs: Shape, rhs: Shape, out: Shape, dims: tuple[tuple[int, ...], ...]) -> GemmPlan | None:
    """The strided batched gemm computing dot_general(lhs, rhs) into `out` (module doc), or None."""
    # Shapes compare without their layouts: the layouts are part of the key explicitly.
    return _plan(*((s, tuple(s.minor_to_major)) for s in (lhs, rhs, out)), tuple(tuple(d) for d in dims))


@functools.lru_cache(maxsize=1024)
def _plan(lhs_key: tuple, rhs_key: tuple, out_key: tuple, dims: tuple[tuple[int, ...], ...]) -> GemmPlan | None:
    (lhs, _), (rhs, _), (out, _) = lhs_key, rhs_key, out_key
    lhs_contracting, rhs_contracting, lhs_batch, rhs_batch = dims
    compute = _COMPUTE.get((lhs.dtype, out.dtype))
    if compute is None or rhs.dtype != lhs.dtype:
        return None
    lhs_free = [d for d in range(lhs.rank) if d not in lhs_contracting and d not in lhs_batch]
    rhs_free = [d for d in range(rhs.rank) if d not in rhs_contracting and d not in rhs_batch]
    nb = len(lhs_batch)
    out_lhs_free = list(range(nb, nb + len(lhs_free)))
    out_rhs_free = list(range(nb + len(lhs_free), out.rank))
    lhs_rows = _group_order(lhs, lhs_batch, lhs_free, lhs_contracting)  # L (M×K) row-major
    rhs_rows = _group_order(rhs, rhs_batch, rhs_contracting, rhs_free)  # R (K×N) row-major
    out_rows = _group_order(out, range(nb), out_lhs_free, out_rhs_free)  # C (M×N) row-major
    if lhs_rows is None or rhs_rows is None or out_rows is None:
        return None
    b = _prod([lhs.dims[d] for d in lhs_batch])
    m = _prod([lhs.dims[d] for d in lhs_free])
    n = _prod([rhs.dims[d] for d in rhs_free])
    k = _prod([lhs.dims[d] for d in lhs_contracting])
    if min(b, m, n, k) == 0:
        return None
    if out_rows:  # Cᵀ (N×M) = Rᵀ·Lᵀ; a transposed row-major matrix is column-major
        m, n = n, m
        p_col, q_col = rhs_rows, lhs_rows
    else:  # C (M×N) = L·R
        p_col, q_col = not lhs_rows, not rhs_rows
    return GemmPlan(p_is_lhs=not out_rows, trans_p=not p_col, trans_q=not q_col, m=m, n=n, k=k,
                    ldp=max(1, m if p_col else k), ldq=max(1, k if q_col else n), ldc=max(1, m),
                    stride_p=m * k, stride_q=k * n, stride_c=m * n, batch=b,
                    operand_dtype=lhs.dtype, output_dtype=out.dtype, compute_dtype=compute)


def _strided(address: int, dtype: np.dtype, shape: tuple[int, ...], strides: tuple[int, ...]) -> np.ndarray:
    """A numpy view of host memory at `address` with element `strides` (all non-negative)."""
    extent = 1 + sum((n - 1) * s for n, s in zip(shape, strides))
    raw = (ctypes.c_uint8 * (extent * dtype.itemsize)).from_address(address)
    base = np.frombuffer(raw, dtype=dtype)
    return as_strided(base, shape, [s * dtype.itemsize for s in strides])


def gemm_numpy(plan: GemmPlan, output: int, lhs: int, rhs: int) -> None:
    """Evaluate `plan` as cuBLAS would, on host memory (the SimulatedDevice's gemm)."""
    p, q = (lhs, rhs) if plan.p_is_lhs else (rhs, lhs)
    p_view = _strided(p, plan.operand_dtype, (plan.batch, plan.m, plan.k),
                      (plan.stride_p, plan.ldp, 1) if plan.trans_p else (plan.stride_p, 1, plan.ldp))
    q_view = _strided(q, plan.operand_dtype, (plan.batch, plan.k, plan.n),
                      (plan.stride_q, plan.ldq, 1) if plan.trans_q else (plan.stride_q, 1, plan.ldq))
    c_view = _strided(output, plan.output_dtype, (plan.batch, plan.m, plan.n), (plan.stride_c, 1, plan.ldc))
    with np.errstate(all="ignore"):
        result = np.matmul(p_view.astype(plan.compute_dtype), q_view.astype(plan.compute_dtype))
        c_view[...] = result.astype(plan.output_dtype)


class CublasGemm:
    """cuBLAS on one stream, through nvmath-python (`nvmath.bindings.cublas`, imported here)."""

    def __init__(self, stream: int, workspace: Any = None):
        from nvmath.bindings import cublas

        self.cublas = cublas
        self.handle = cublas.create()
        cublas.set_stream(self.handle, stream)
        self.workspace = workspace  # a device buffer of its own (kept alive here), or cuBLAS's default
        if workspace is not None:
            cublas.set_workspace(self.handle, workspace.ptr, workspace.size)
        self._scalars: dict[np.dtype, tuple[np.ndarray, np.ndarray]] = {}

    def __call__(self, plan: GemmPlan, output: int, lhs: int, rhs: int) -> None:
        cublas = self.cublas
        p, q = (lhs, rhs) if plan.p_is_lhs else (rhs, lhs)
        alpha, beta = self._alpha_beta(plan.compute_dtype)
        compute = (cublas.ComputeType.COMPUTE_64F if plan.compute_dtype in (np.float64, np.complex128)
                   else cublas.ComputeType.COMPUTE_32F)
        op = {False: cublas.Operation.N, True: cublas.Operation.T}
        operand_type = CUDA_DATA_TYPE[plan.operand_dtype]
        cublas.gemm_strided_batched_ex(
            self.handle, op[plan.trans_p], op[plan.trans_q], plan.m, plan.n, plan.k,
            alpha.ctypes.data, p, operand_type, plan.ldp, plan.stride_p,
            q, operand_type, plan.ldq, plan.stride_q,
            beta.ctypes.data, output, CUDA_DATA_TYPE[plan.output_dtype], plan.ldc, plan.stride_c,
            plan.batch, compute, cublas.GemmAlgo.DEFAULT)

    def _alpha_beta(self, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
        # Host scalars (cuBLAS's default pointer mode), read when the call is enqueued.
        if dtype not in self._scalars:
            self._scalars[dtype] = (np.ones(1, dtype), np.zeros(1, dtype))
        return self._scalars[dtype]

    def close(self) -> None:
        if self.handle:
            self.cublas.destroy(self.handle)
            self.handle = 0


__all__ = ["CUDA_DATA_TYPE", "CublasGemm", "GemmPlan", "gemm_numpy", "plan_gemm"]
