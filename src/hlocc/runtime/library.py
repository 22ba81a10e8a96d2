"""Library calls of the CPU runtime: gemm (dot) and convolution on buffer views, through numpy's
BLAS (XLA:CPU's Eigen/oneDNN calls and XLA:GPU's cuBLAS GemmThunk play this part); sort and top-k
(XLA:CPU's runtime sort and `__xla_cpu_runtime_TopKF32`) with numpy's stable argsort.

sort computes the permutation once from its key operand and gathers every operand with it: a key
comparator (evaluator/sorting.py `comparator_key`, what JAX emits) is an argsort of its key,
evaluated elementwise on the whole operand; any other comparator is run by the vectorised merge
sort, whose probes evaluate the comparator on whole arrays. top-k orders by XLA:CPU's total order,
descending, ties by lower index.

Both take *logical* views of the buffers (numpy views that put a non-default layout back into
logical order without copying) and write the result into the output view. Arithmetic is the
reference evaluator's (evaluator/dot.py `contraction_dtype`): operands are converted to the
computation type — bf16/f16/f8 to f32, integers stay in the result type — multiplied and
accumulated there, and the result is converted once to the output type.

gemm copies only what the layout forces: each operand is viewed as [batch, rows, contraction]
(resp. [batch, contraction, columns]) by a transpose (free) and a reshape, which copies only when
the dimensions merged are not adjacent in memory; numpy's matmul hands a transposed matrix to BLAS
as a transposed operand. The output is written in place when its layout allows the
[batch, rows, columns] view and its type is the computation type.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hlocc.evaluator.convolution import convolve
from hlocc.evaluator.dot import contraction_dtype, to_result
from hlocc.evaluator.sorting import sort_permutation
from hlocc.evaluator.sorting import top_k as _top_k
from hlocc.hlo.attributes import ConvDimensionNumbers, WindowDim
from hlocc.hlo.ir import HloComputation


def _prod(values) -> int:
    return int(np.prod(values, dtype=np.int64))


def gemm(out: np.ndarray, lhs: np.ndarray, rhs: np.ndarray, lhs_contracting: Sequence[int],
         rhs_contracting: Sequence[int], lhs_batch: Sequence[int], rhs_batch: Sequence[int]) -> None:
    """out = dot_general(lhs, rhs): out's dims are batch, lhs free, rhs free (XLA's DotGeneral)."""
    dtype = contraction_dtype(lhs.dtype, rhs.dtype, result=out.dtype)
    lhs_free = [d for d in range(lhs.ndim) if d not in lhs_contracting and d not in lhs_batch]
    rhs_free = [d for d in range(rhs.ndim) if d not in rhs_contracting and d not in rhs_batch]
    b = _prod([lhs.shape[d] for d in lhs_batch])
    m = _prod([lhs.shape[d] for d in lhs_free])
    n = _prod([rhs.shape[d] for d in rhs_free])
    k = _prod([lhs.shape[d] for d in lhs_contracting])
    a = np.transpose(lhs, [*lhs_batch, *lhs_free, *lhs_contracting]).reshape(b, m, k)
    w = np.transpose(rhs, [*rhs_batch, *rhs_contracting, *rhs_free]).reshape(b, k, n)
    a = a.astype(dtype, copy=False)
    w = w.astype(dtype, copy=False)
    target = _view_as(out, (b, m, n)) if out.dtype == dtype else None
    with np.errstate(all="ignore"):
        if target is not None:
            np.matmul(a, w, out=target)
            return
        result = np.matmul(a, w)
    np.copyto(out, to_result(result, out.dtype).reshape(out.shape))


def _view_as(array: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """`array` reshaped without a copy, or None when its strides do not allow it."""
    try:
        view = array.view()
        view.shape = shape  # raises instead of copying
        return view
    except AttributeError:
        return None


def convolution(out: np.ndarray, lhs: np.ndarray, rhs: np.ndarray, window: Sequence[WindowDim],
                dnums: ConvDimensionNumbers, feature_groups: int, batch_groups: int) -> None:
    """out = ConvGeneralDilated(lhs, rhs) as im2col + one batched BLAS matmul per group (the
    evaluator's `convolve`; the patch matrix is the one copy the algorithm needs)."""
    dtype = contraction_dtype(lhs.dtype, rhs.dtype, result=out.dtype)
    result = convolve(lhs, rhs, tuple(window), dnums, feature_groups, batch_groups, dtype)
    np.copyto(out, to_result(result, out.dtype))


def sort(operands: Sequence[np.ndarray], evaluator, dimension: int, comparator: HloComputation) -> list[np.ndarray]:
    """The operands sorted along `dimension` by the stable permutation `comparator` defines."""
    moved = [np.moveaxis(np.asarray(o), dimension, -1) for o in operands]
    perm = sort_permutation(evaluator, comparator, moved)
    return [np.moveaxis(np.take_along_axis(m, perm, axis=-1), -1, dimension) for m in moved]


def top_k(operands: Sequence[np.ndarray], evaluator, k: int) -> list[np.ndarray]:
    """(values, s32 indices) of the k largest elements of each row of the last dimension."""
    return list(_top_k(np.asarray(operands[0]), k))


__all__ = ["convolution", "gemm", "sort", "top_k"]
