"""Library calls of the CPU runtime: gemm (dot) and convolution on buffer views, through numpy's
BLAS (XLA:CPU's Eigen/oneDNN calls and XLA:GPU's cuBLAS GemmThunk play this part); sort and top-k
(XLA:CPU's runtime sort and `__xla_cpu_runtime_TopKF32`) with numpy's stable argsort, where no sort
kernel runs them (codegen/emitters/sort.py compiles them on the cpu backend: these calls serve
complex elements and the cuda backend, on the host).

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

import ctypes
import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from hlocc.evaluator.convolution import convolve
from hlocc.evaluator.dot import contraction_dtype, to_result
from hlocc.evaluator.sorting import sort_permutation
from hlocc.evaluator.sorting import top_k as _top_k
from hlocc.evaluator.windows import window_view
from hlocc.hlo.attributes import ConvDimensionNumbers, WindowDim
from hlocc.hlo.ir import HloComputation
from hlocc.hlo.types import as_strided
from hlocc.runtime import blas, small_gemm


def _prod(values) -> int:
    return math.prod(int(v) for v in values)


@dataclass(frozen=True)
class _GemmPlan:
    """How one dot_general runs as a [batch, m, k] @ [batch, k, n] matmul (the Python work of a
    gemm, done once per operand shapes, strides and dims: a small dot's BLAS call takes a few
    microseconds, its planning took five times that)."""

    dtype: np.dtype
    lhs_perm: tuple[int, ...] | None  # None: the operand is already in matmul order
    rhs_perm: tuple[int, ...] | None
    lhs_shape: tuple[int, ...]  # [m, k] or [b, m, k]
    rhs_shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    convert_lhs: bool
    convert_rhs: bool
    in_place: bool  # the output's strides and type allow matmul to write into it


_GEMM_PLANS: dict[tuple, _GemmPlan] = {}
_GEMM_PLAN_LIMIT = 4096


def _gemm_plan(out: np.ndarray, lhs: np.ndarray, rhs: np.ndarray, lhs_contracting: Sequence[int],
               rhs_contracting: Sequence[int], lhs_batch: Sequence[int], rhs_batch: Sequence[int]) -> _GemmPlan:
    return _shape_plan(out.dtype, lambda shape: _view_as(out, shape) is not None, lhs.dtype, lhs.shape, rhs.dtype,
                       rhs.shape, lhs_contracting, rhs_contracting, lhs_batch, rhs_batch)


def _shape_plan(out_dtype: np.dtype, out_viewable: Callable[[tuple], bool], lhs_dtype: np.dtype, lhs_shape: tuple,
                rhs_dtype: np.dtype, rhs_shape: tuple, lhs_contracting: Sequence[int], rhs_contracting: Sequence[int],
                lhs_batch: Sequence[int], rhs_batch: Sequence[int]) -> _GemmPlan:
    """`_gemm_plan` from the operands' logical shapes; `out_viewable(shape)`: whether the output's
    view takes that shape without a copy."""
    dtype = contraction_dtype(lhs_dtype, rhs_dtype, result=out_dtype)
    lhs_free = [d for d in range(len(lhs_shape)) if d not in lhs_contracting and d not in lhs_batch]
    rhs_free = [d for d in range(len(rhs_shape)) if d not in rhs_contracting and d not in rhs_batch]
    b = _prod([lhs_shape[d] for d in lhs_batch])
    m = _prod([lhs_shape[d] for d in lhs_free])
    n = _prod([rhs_shape[d] for d in rhs_free])
    k = _prod([lhs_shape[d] for d in lhs_contracting])
    lhs_perm = (*lhs_batch, *lhs_free, *lhs_contracting)
    rhs_perm = (*rhs_batch, *rhs_contracting, *rhs_free)
    # A batch of one is a plain matrix product (numpy's 2-D path is the shorter one).
    lead = (b,) if b != 1 else ()
    in_place = out_dtype == dtype and out_viewable((*lead, m, n))
    return _GemmPlan(dtype, None if lhs_perm == tuple(range(len(lhs_shape))) else lhs_perm,
                     None if rhs_perm == tuple(range(len(rhs_shape))) else rhs_perm, (*lead, m, k), (*lead, k, n),
                     (*lead, m, n), lhs_dtype != dtype, rhs_dtype != dtype, in_place)


def gemm(out: np.ndarray, lhs: np.ndarray, rhs: np.ndarray, lhs_contracting: Sequence[int],
         rhs_contracting: Sequence[int], lhs_batch: Sequence[int], rhs_batch: Sequence[int]) -> None:
    """out = dot_general(lhs, rhs): out's dims are batch, lhs free, rhs free (XLA's DotGeneral)."""
    key = (out.shape, out.strides, out.dtype, lhs.shape, lhs.dtype, rhs.shape, rhs.dtype,
           tuple(lhs_contracting), tuple(rhs_contracting), tuple(lhs_batch), tuple(rhs_batch))
    plan = _GEMM_PLANS.get(key)
    if plan is None:
        if len(_GEMM_PLANS) >= _GEMM_PLAN_LIMIT:  # many sizes (symbolic shapes): start over
            _GEMM_PLANS.clear()
        plan = _GEMM_PLANS[key] = _gemm_plan(out, lhs, rhs, lhs_contracting, rhs_contracting, lhs_batch, rhs_batch)
    _run_gemm(plan, out, lhs, rhs)


class _BufferView(NamedTuple):  # (a tuple: a new size of a dynamic program makes three per gemm)
    """How the logical array of a buffer reference is viewed in its allocation's bytes: its
    dtype and physical dims at a byte offset, then the transpose back to logical order (None for
    the default layout); `thunks.logical_array`'s work, done once per reference."""

    allocation: int
    offset: int
    dtype: np.dtype
    physical_dims: tuple[int, ...]
    perm: tuple[int, ...] | None

    @staticmethod
    def of(ref) -> _BufferView:
        shape = ref.shape
        order = list(reversed(shape.minor_to_major))
        perm = None if order == sorted(order) else tuple(int(d) for d in np.argsort(order))
        return _BufferView(ref.slice.allocation_index, ref.slice.offset, shape.dtype, tuple(shape.physical_dims), perm)

    def view(self, allocations: Sequence[np.ndarray]) -> np.ndarray:
        if 0 in self.physical_dims:  # (no bytes: the slice may lie past its allocation's end)
            array = np.empty(self.physical_dims, self.dtype)
        else:
            array = np.ndarray(self.physical_dims, self.dtype, allocations[self.allocation], self.offset)
        return array if self.perm is None else array.transpose(self.perm)


@dataclass(frozen=True)
class _GemmCall:
    """One gemm thunk's buffer references (kept: the cache below is keyed by their ids), the
    views of its operands and output, and its plan: a call reads nothing of the Shapes."""

    refs: tuple
    dims: tuple
    out: _BufferView
    lhs: _BufferView
    rhs: _BufferView
    plan: _GemmPlan
    blas: blas.GemmLayout | None  # the BLAS call on the buffers' addresses (runtime/blas.py), where bound


_GEMM_CALLS: dict[tuple[int, int, int], _GemmCall] = {}


def gemm_buffers(allocations: Sequence[np.ndarray], output, lhs, rhs, dims: tuple[tuple[int, ...], ...]) -> None:
    """`gemm` of a thunk's buffer references (runtime/thunks.py BufferRef) in host allocations:
    the views and the plan are made at the first call of these references and reused (a small
    dot's Python work was twice its BLAS call)."""
    call = _GEMM_CALLS.get((id(output), id(lhs), id(rhs)))
    if call is None or call.refs[0] is not output or call.refs[1] is not lhs or call.refs[2] is not rhs \
            or call.dims != dims:
        call = _gemm_call(allocations, output, lhs, rhs, dims)
    if call.blas is not None:
        call.blas.run(*(_address(allocations[v.allocation]) + v.offset for v in (call.lhs, call.rhs, call.out)))
        return
    _run_gemm(call.plan, call.out.view(allocations), call.lhs.view(allocations), call.rhs.view(allocations))


def _gemm_call(allocations: Sequence[np.ndarray], output, lhs, rhs, dims: tuple[tuple[int, ...], ...]) -> _GemmCall:
    views = [_BufferView.of(ref) for ref in (output, lhs, rhs)]
    arrays = [v.view(allocations) for v in views]
    plan = _gemm_plan(*arrays, *dims)
    call = _GemmCall((output, lhs, rhs), dims, *views, plan, _blas_layout(plan, *arrays))
    if len(_GEMM_CALLS) >= _GEMM_PLAN_LIMIT:  # many programs or sizes: start over
        _GEMM_CALLS.clear()
    _GEMM_CALLS[(id(output), id(lhs), id(rhs))] = call
    return call


@dataclass(frozen=True)
class GemmRecipe:
    """A gemm thunk planned once for every size of a dynamic program (runtime/dynamic_program.py):
    per buffer (output, lhs, rhs) its allocation, offset, dtype, physical dims (DimExprs where
    symbolic) and transpose. `at(size)` is the thunk at one binding, `size` giving each symbolic
    number's value: numbers looked up, no Shape or BufferRef rebuilt (binding a gemm thunk through
    its BufferRefs cost ~40 µs, most of a new size's host work on the MLP and the transformer)."""

    buffers: tuple[tuple[int, Any, np.dtype, tuple, tuple[int, ...] | None], ...]  # numbers: int or _At
    dims: tuple
    packed: np.ndarray | None = None  # a constant rhs packed for small_gemm (`_packed_rhs`): [panels, k, panel]

    @staticmethod
    def of(output, lhs, rhs, dims: tuple, index: Callable[[Any], int],
           constants: dict[int, np.ndarray] | None = None) -> GemmRecipe:
        """The recipe of a gemm over these BufferRefs (runtime/thunks.py GemmThunk's); `index`
        gives a symbolic number's position among the values `at` takes; `constants` (allocation
        index: bytes) are the program's, whose large f32 matrices a few rows multiply by
        small_gemm's kernel (at the bindings with such a row count)."""
        def number(n):
            return n if isinstance(n, int) else _At(index(n))
        views = []
        for ref in (output, lhs, rhs):
            order = list(reversed(ref.shape.minor_to_major))
            perm = None if order == sorted(order) else tuple(int(d) for d in np.argsort(order))
            views.append((ref.slice.allocation_index, number(ref.slice.offset), ref.shape.dtype,
                          tuple(number(d) for d in ref.shape.physical_dims), perm))
        return GemmRecipe(tuple(views), dims, _packed_rhs(views[2], dims, constants or {}))

    def at(self, values: Sequence[int]) -> BoundGemm | PackedGemm:
        """The gemm at the binding whose numbers are `values`."""
        views = [_BufferView(a, values[offset.i] if type(offset) is _At else offset, dtype,
                             tuple([values[d.i] if type(d) is _At else d for d in dims]), perm)
                 for a, offset, dtype, dims, perm in self.buffers]
        plan, layout = _view_plan(views, self.dims)
        if self.packed is not None:
            packed = PackedGemm.of(*views, plan, self.packed)
            if packed is not None:
                return packed
        if layout is not None:
            out, lhs, rhs = views
            return BlasBoundGemm(layout, out.allocation, out.offset, lhs.allocation, lhs.offset, rhs.allocation,
                                 rhs.offset)
        return BoundGemm(*views, plan)


def _packed_rhs(rhs: tuple, dims: tuple, constants: dict[int, np.ndarray]) -> np.ndarray | None:
    """The rhs of a gemm packed for small_gemm (its module doc), where it is a constant f32 matrix
    of at least MIN_WEIGHT_BYTES without batch dimensions, else None."""
    allocation, offset, dtype, physical, perm = rhs
    lhs_contracting, rhs_contracting, lhs_batch, rhs_batch = dims
    data = constants.get(allocation)
    if data is None or dtype != np.float32 or rhs_batch or not all(isinstance(d, int) for d in (offset, *physical)) \
            or _prod(physical) * 4 < small_gemm.MIN_WEIGHT_BYTES:
        return None
    logical = _BufferView(allocation, offset, dtype, physical, perm).view({allocation: data})
    free = [d for d in range(logical.ndim) if d not in rhs_contracting]
    w = logical.transpose(*rhs_contracting, *free)
    return small_gemm.pack(w.reshape(_prod(w.shape[:len(rhs_contracting)]), -1))


@dataclass(frozen=True)
class PackedGemm:
    """A gemm step (runtime/call_plan.py) of a few rows by a packed constant (small_gemm): the
    addresses of its row-major lhs [m, k] and output [m, n] come from the call's memory; the
    kernel of its (k, n) runs once it is hot (`small_gemm.hot_kernel`), BLAS (`fallback`, the
    same product unpacked) until then."""

    lhs: tuple[int, int]  # (allocation, byte offset)
    out: tuple[int, int]
    m: int
    k: int
    n: int
    packed: np.ndarray = field(repr=False)  # (kept alive: the kernel reads it at `packed_address`)
    packed_address: int = field(repr=False)
    fallback: BoundGemm = field(repr=False)
    kernel: list = field(default_factory=lambda: [None], repr=False)  # [the Kernel, once hot]

    @staticmethod
    def of(out: _BufferView, lhs: _BufferView, rhs: _BufferView, plan: _GemmPlan, packed: np.ndarray
           ) -> PackedGemm | None:
        """The step where the binding's row count is one the kernel is for and the lhs and output
        are plain row-major f32 matrices in place, else None (BLAS runs it)."""
        if plan.dtype != np.float32 or plan.convert_lhs or plan.convert_rhs or not plan.in_place \
                or len(plan.lhs_shape) != 2 or plan.lhs_perm is not None or lhs.perm is not None \
                or out.perm is not None:
            return None
        (m, k), n = plan.lhs_shape, plan.out_shape[1]
        if not 2 <= m <= small_gemm.MAX_ROWS or not 0 < k == packed.shape[1] \
                or -(-n // packed.shape[2]) != packed.shape[0]:
            return None
        return PackedGemm((lhs.allocation, lhs.offset), (out.allocation, out.offset), m, k, n, packed,
                          packed.ctypes.data, BoundGemm(out, lhs, rhs, plan))

    def execute(self, memory) -> None:
        kernel = self.kernel[0]
        if kernel is None:
            kernel = self.kernel[0] = small_gemm.hot_kernel(self.k, self.n)
            if kernel is None:
                self.fallback.execute(memory)
                return
        addresses = memory.addresses
        (a, a_offset), (o, o_offset) = self.lhs, self.out
        kernel.function(addresses[a] + a_offset, self.packed_address, addresses[o] + o_offset, self.m)


class _At(NamedTuple):
    """A symbolic number of a GemmRecipe: the position of its value."""

    i: int


@dataclass(frozen=True)
class BoundGemm:
    """A gemm at one binding (`GemmRecipe.at`): a step of a call plan (runtime/call_plan.py)."""

    out: _BufferView
    lhs: _BufferView
    rhs: _BufferView
    plan: _GemmPlan

    def execute(self, memory) -> None:
        allocations = memory.allocations
        _run_gemm(self.plan, self.out.view(allocations), self.lhs.view(allocations), self.rhs.view(allocations))


@dataclass(frozen=True)
class BlasBoundGemm:
    """A gemm at one binding that BLAS runs on its buffers as they are (`GemmRecipe.at`): one
    Fortran call on the allocations' addresses plus the offsets, without the views of BoundGemm's
    path (~3 µs a gemm in Python; the static program's form is runtime/blas_gemm.py's)."""

    layout: blas.GemmLayout
    out: int
    out_offset: int
    lhs: int
    lhs_offset: int
    rhs: int
    rhs_offset: int

    def execute(self, memory) -> None:
        a = memory.addresses
        self.layout.run(a[self.lhs] + self.lhs_offset, a[self.rhs] + self.rhs_offset, a[self.out] + self.out_offset)


@functools.lru_cache(maxsize=256)
def _stand_in_of(dtype: np.dtype, dims: tuple, perm: tuple | None) -> np.ndarray:
    array = as_strided(np.zeros(1, dtype), dims, _c_strides(dims, dtype.itemsize))
    array.flags.writeable = False
    return array if perm is None else array.transpose(perm)


def _stand_in(view: _BufferView) -> np.ndarray:
    """An array with `view`'s logical dims and strides over one element (nothing allocated; read
    only and shared: a binding's gemms view the same shapes several times)."""
    return _stand_in_of(view.dtype, view.physical_dims, view.perm)


_VIEW_PLANS: dict[tuple, tuple[_GemmPlan, blas.GemmLayout | None]] = {}


def _view_plan(views: Sequence[_BufferView], dims: tuple) -> tuple[_GemmPlan, blas.GemmLayout | None]:
    """`_gemm_plan` of three views' shapes and, where BLAS takes the buffers as they are, its call
    (`_blas_layout` of stand-ins with the views' dims and strides, which is all a layout reads;
    numpy's OpenBLAS is bound for it, once); cached per shapes (each new size of a dynamic program
    asks once per gemm)."""
    key = (*((v.dtype, v.physical_dims, v.perm) for v in views), dims)
    found = _VIEW_PLANS.get(key)
    if found is None:
        out, lhs, rhs = views
        if out.perm is None:  # C-contiguous: any shape of as many elements is a view of it
            def viewable(shape):
                return True
        else:  # a stand-in with the output's strides and no bytes of its own
            stand_in = _stand_in(out)

            def viewable(shape):
                return _view_as(stand_in, shape) is not None
        plan = _shape_plan(out.dtype, viewable, lhs.dtype, _logical(lhs), rhs.dtype, _logical(rhs), *dims)
        layout = None
        if blas.use_numpy_openblas() and all(0 not in v.physical_dims for v in views):
            layout = _blas_layout(plan, *(_stand_in(v) for v in views))
        if len(_VIEW_PLANS) >= _GEMM_PLAN_LIMIT:  # many sizes: start over
            _VIEW_PLANS.clear()
        found = _VIEW_PLANS[key] = (plan, layout)
    return found


def _logical(view: _BufferView) -> tuple[int, ...]:
    dims = view.physical_dims
    return dims if view.perm is None else tuple([dims[p] for p in view.perm])


def _c_strides(dims: Sequence[int], itemsize: int) -> tuple[int, ...]:
    strides, step = [], itemsize
    for d in reversed(dims):
        strides.append(step)
        step *= d
    return tuple(reversed(strides))


def _blas_layout(plan: _GemmPlan, out: np.ndarray, lhs: np.ndarray, rhs: np.ndarray) -> blas.GemmLayout | None:
    """The BLAS calls of a planned gemm (runtime/blas.py), where the operands' matmul views need no copy."""
    if not blas.bound() or plan.convert_lhs or plan.convert_rhs or not plan.in_place:
        return None
    a = _view_as(lhs if plan.lhs_perm is None else lhs.transpose(plan.lhs_perm), plan.lhs_shape)
    w = _view_as(rhs if plan.rhs_perm is None else rhs.transpose(plan.rhs_perm), plan.rhs_shape)
    target = _view_as(out, plan.out_shape)
    if a is None or w is None or target is None:
        return None
    return blas.gemm_layout(a, w, target)


def _address(allocation: np.ndarray) -> int:
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(allocation))
    except (TypeError, ValueError, BufferError):  # read-only (a constant), or empty
        return allocation.ctypes.data


def _run_gemm(plan: _GemmPlan, out: np.ndarray, lhs: np.ndarray, rhs: np.ndarray) -> None:
    a = (lhs if plan.lhs_perm is None else lhs.transpose(plan.lhs_perm)).reshape(plan.lhs_shape)
    w = (rhs if plan.rhs_perm is None else rhs.transpose(plan.rhs_perm)).reshape(plan.rhs_shape)
    if plan.convert_lhs:
        a = a.astype(plan.dtype)
    if plan.convert_rhs:
        w = w.astype(plan.dtype)
    with np.errstate(all="ignore"):
        if plan.in_place:
            target = out.view()
            target.shape = plan.out_shape
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
    """out = ConvGeneralDilated(lhs, rhs) as im2col + one batched BLAS matmul.

    The patch matrix is built in [batch, group, input feature × taps, output positions] order, so
    that the product with the kernel, [group, output feature, input feature × taps], comes out in
    [batch, output feature, output positions] order: an NCHW-like output is written by the matmul
    itself, with no transpose after it (XLA:CPU's Eigen convolution makes the same choice of
    contraction order per layout). A window of stride 1 builds its patches from the zero-padded
    input flattened per feature (`_flat_patches`: one long contiguous copy per tap). Batch-grouped
    convolutions (the weight gradients of grouped convolutions) go through the evaluator's `convolve`."""
    if out.size == 0 or lhs.size == 0 or rhs.size == 0:  # (no output, or sums of no terms: zeros)
        out.fill(0)
        return
    dtype = contraction_dtype(lhs.dtype, rhs.dtype, result=out.dtype)
    if batch_groups != 1:
        result = convolve(lhs, rhs, tuple(window), dnums, feature_groups, batch_groups, dtype)
        np.copyto(out, to_result(result, out.dtype))
        return
    nsp = len(dnums.input_spatial)
    x = lhs.transpose((dnums.input_batch, dnums.input_feature, *dnums.input_spatial))
    k = rhs.transpose((dnums.kernel_output_feature, dnums.kernel_input_feature, *dnums.kernel_spatial))
    y = out.transpose((dnums.output_batch, dnums.output_feature, *dnums.output_spatial))
    n, c = x.shape[:2]
    o, cg = k.shape[:2]
    taps = k.shape[2:]
    positions = y.shape[2:]
    groups, og, tap_count = feature_groups, o // feature_groups, _prod(taps)
    w = k.astype(dtype, copy=False).reshape(groups, og, cg * tap_count)
    if _unit_window(window) and 0 not in positions:
        p, rows = _flat_patches(x, window, positions, dtype)  # [n, c, taps..., L], the padded input's row sizes
        acc = np.empty((n, groups, og, positions[0] * _prod(rows)), dtype)
        _matmul(w, p.reshape(n, groups, cg * tap_count, p.shape[-1]), acc[..., :p.shape[-1]])
        valid = acc.reshape(n, o, positions[0], *rows)[(Ellipsis, *(slice(0, m) for m in positions[1:]))]
        np.copyto(y, valid if out.dtype == dtype else to_result(valid, out.dtype))
        return
    trivial = (WindowDim(size=1), WindowDim(size=1))
    patches = window_view(x.astype(dtype, copy=False), trivial + tuple(window), np.zeros((), dtype))
    patches = patches.reshape((n, c, *positions, *taps))  # [n, c, positions..., taps...]
    order = (0, 1, *range(2 + nsp, 2 + 2 * nsp), *range(2, 2 + nsp))  # [n, c, taps..., positions...]
    p = patches.transpose(order).reshape(n, groups, cg * tap_count, _prod(positions))
    target = _view_as(y, (n, groups, og, _prod(positions))) if out.dtype == dtype else None
    if target is not None:
        _matmul(w, p, target)
        return
    with np.errstate(all="ignore"):
        result = np.matmul(w, p)
    np.copyto(y, to_result(result, out.dtype).reshape(y.shape))


def _unit_window(window: Sequence[WindowDim]) -> bool:
    return all(w.stride == 1 and w.lhs_dilate == 1 and not w.reversal and w.pad_lo >= 0 and w.pad_hi >= 0
               for w in window)


def _flat_patches(x: np.ndarray, window: Sequence[WindowDim], positions: Sequence[int],
                  dtype: np.dtype) -> tuple[np.ndarray, tuple[int, ...]]:
    """The patches of a stride-1 window over `x` [n, c, spatial...]: the zero-padded input is
    flattened per (batch, feature), and output position (i, j, ...) reads tap t at flat index
    i·W + j + offset(t) (W the padded row size), so each tap is one contiguous slice of every
    row: [n, c, taps..., L] with L = (positions - 1)·row strides + 1. The columns that fall in a
    row's padding compute values no output keeps (the caller reads the valid ones: a 3×3 window
    over 8×8 computes 78 columns for 64 positions). Returns the patches and the padded sizes of
    the spatial dimensions after the first."""
    n, c = x.shape[:2]
    padded = np.zeros((n, c, *(s + w.pad_lo + w.pad_hi for s, w in zip(x.shape[2:], window))), dtype)
    padded[(slice(None), slice(None), *(slice(w.pad_lo, w.pad_lo + s) for s, w in zip(x.shape[2:], window)))] = x
    dims = padded.shape[2:]
    strides = [_prod(dims[i + 1:]) for i in range(len(dims))]
    length = sum((m - 1) * s for m, s in zip(positions, strides)) + 1
    flat = padded.reshape(n, c, -1)
    taps = tuple(w.size for w in window)
    p = np.empty((n, c, *taps, length), dtype)
    for tap in np.ndindex(*taps):
        offset = sum(t * w.rhs_dilate * s for t, w, s in zip(tap, window, strides))
        p[(slice(None), slice(None), *tap)] = flat[:, :, offset:offset + length]
    return p, tuple(dims[1:])


_FEW_COLUMNS = 16
"""Output positions per image under which `_matmul` multiplies the whole batch at once: n
matrix-vector products read the kernel n times (a 2048 -> 1000 1x1 convolution of 16 images:
16 gemvs over its 8 MB)."""


def _matmul(w: np.ndarray, p: np.ndarray, target: np.ndarray) -> None:
    """target[n, g] = w[g] @ p[n, g]; one group as [n] products of a 2-D w (numpy's 4-D
    broadcasting matmul takes a loop without BLAS: 3x slower), or, with fewer than _FEW_COLUMNS
    columns per image, as one product with the images side by side. numpy's BLAS, not the bound
    one: at a small CNN's shapes ([16, 27] @ [16 × 27, 286], [32, 144] @ [16 × 144, 78]) MKL's
    batched call measured 1.2x slower."""
    n, groups, k, columns = p.shape
    with np.errstate(all="ignore"):
        if groups == 1 and n > 1 and columns < _FEW_COLUMNS:
            side_by_side = p[:, 0].transpose(1, 0, 2).reshape(k, n * columns)
            product = np.matmul(w[0], side_by_side).reshape(w.shape[1], n, columns)
            np.copyto(target[:, 0], product.transpose(1, 0, 2))
            return
        if groups == 1:
            w, p, target = w[0], p[:, 0], target[:, 0]
        np.matmul(w, p, out=target)


def sort(operands: Sequence[np.ndarray], evaluator, dimension: int, comparator: HloComputation) -> list[np.ndarray]:
    """The operands sorted along `dimension` by the stable permutation `comparator` defines."""
    moved = [np.moveaxis(np.asarray(o), dimension, -1) for o in operands]
    perm = sort_permutation(evaluator, comparator, moved)
    return [np.moveaxis(np.take_along_axis(m, perm, axis=-1), -1, dimension) for m in moved]


def top_k(operands: Sequence[np.ndarray], evaluator, k: int) -> list[np.ndarray]:
    """(values, s32 indices) of the k largest elements of each row of the last dimension."""
    return list(_top_k(np.asarray(operands[0]), k))


__all__ = ["BoundGemm", "GemmRecipe", "convolution", "gemm", "gemm_buffers", "sort", "top_k"]
