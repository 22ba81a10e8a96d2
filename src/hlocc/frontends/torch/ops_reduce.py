"""Table entries for reductions (sum, mean, amax/amin, max/min.dim, argmax/argmin, any/all, prod,
var), softmax/log_softmax and their backward, scans (cumsum, cummax, logcumsumexp), batch/layer/group
norm and pooling; sorts and order statistics are in ops_sort.py.

Half-precision inputs (f16, bf16) are reduced in f32 and the result rounded back, as ATen's CPU
kernels accumulate (`at::opmath_type`); a norm computes its statistics in f32 the same way.
Pooling is HLO reduce-window, padding with the reduction's identity (−inf for max), with the
output size PyTorch computed (ceil_mode adds the high padding that size needs).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from hlocc.frontends.torch.ops_shape import gather_along
from hlocc.hlo.attributes import PadDim, WindowDim
from hlocc.hlo.ir import HloComputation, HloInstruction
from hlocc.hlo.types import Shape, primitive_type

if TYPE_CHECKING:  # (the rules' context; lowering.py imports this table)
    from hlocc.frontends.torch.lowering import LoweringContext

_HALF = ("f16", "bf16")
_INIT = {"add": 0, "multiply": 1, "maximum": -math.inf, "minimum": math.inf, "and": True, "or": False}
_INT_LIMITS = {"maximum": "min", "minimum": "max"}


def norm_dims(dims, rank: int) -> tuple[int, ...]:
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return tuple(range(rank))
    dims = [dims] if isinstance(dims, int) else dims
    return tuple(sorted(d + rank if d < 0 else d for d in dims))


def _init_value(opcode: str, et: str):
    value = _INIT[opcode]
    if isinstance(value, float) and not (et.startswith(("f", "bf"))):
        info = np.iinfo(primitive_type(et).dtype) if et != "pred" else None
        return getattr(info, _INT_LIMITS[opcode]) if info is not None else opcode == "minimum"
    return value


def reduce(cx: LoweringContext, x: HloInstruction, dims, opcode: str, keepdim: bool = False) -> HloInstruction:
    """`opcode`-reduce `x` over `dims` (kept as size 1 with `keepdim`), in `x`'s element type."""
    et = x.shape.element_type.name
    dims = norm_dims(dims, x.shape.rank)
    kept = [d for i, d in enumerate(x.shape.dims) if i not in dims]
    out = cx.add("reduce", [x, cx.constant(_init_value(opcode, et), et)],
                 {"dimensions": dims, "to_apply": cx.reducer(opcode, et)}, shape=x.shape.with_dims(kept))
    if keepdim:
        out = cx.reshape(out, [1 if i in dims else d for i, d in enumerate(x.shape.dims)])
    return out


def _accumulation_type(et: str) -> str:
    return "f32" if et in _HALF else et


def _sum(cx: LoweringContext, x, dims=None, keepdim=False, *, dtype=None):
    et = cx.element_type
    total = reduce(cx, cx.convert(x, _accumulation_type(et)), dims, "add", keepdim)
    return cx.convert(total, et)


def _mean(cx: LoweringContext, x, dims=None, keepdim=False, *, dtype=None):
    et = cx.element_type
    acc = _accumulation_type(et)
    total = reduce(cx, cx.convert(x, acc), dims, "add", keepdim)
    count = cx.size_of(x, norm_dims(dims, x.shape.rank), acc)
    return cx.convert(cx.add("divide", [total, cx.broadcast_to(count, total.shape.dims)]), et)


def _divide(cx: LoweringContext, x: HloInstruction, scalar: HloInstruction) -> HloInstruction:
    return cx.add("divide", [x, cx.broadcast_to(scalar, x.shape.dims)])


def _extremum(opcode: str):
    def rule(cx: LoweringContext, x, dims=None, keepdim=False):
        return reduce(cx, x, dims, opcode, keepdim)
    return rule


def _arg_extremum(opcode: str):
    """(values, indices) of max/min along `dim`: the first index holding the extremum. NaN is the
    extremum of a row holding one (the reduction propagates it, as PyTorch does), and compares
    unequal to itself: a NaN counts as a hit, else such a row's index was the sentinel 2**62."""
    def indices(cx: LoweringContext, x, dim, keepdim):
        if dim is None:
            x, dim = cx.reshape(x, [numel(x)]), 0
        dim = norm_dims(dim, x.shape.rank)[0]
        best = reduce(cx, x, [dim], opcode, keepdim=True)
        hit = cx.add("compare", [x, cx.broadcast_to(best, x.shape.dims)], {"direction": "EQ"})
        if x.shape.element_type.is_float:
            hit = cx.add("or", [hit, cx.add("compare", [x, x], {"direction": "NE"})])
        iota = cx.add("iota", attrs={"iota_dimension": dim}, shape=x.shape.with_element_type(primitive_type("s64")))
        big = cx.full(2**62, iota.shape)
        first = reduce(cx, cx.add("select", [hit, iota, big]), [dim], "minimum", keepdim)
        return (best if keepdim else cx.reshape(best, first.shape.dims)), first

    def with_values(cx: LoweringContext, x, dim, keepdim=False):
        return list(indices(cx, x, dim, keepdim))

    def only_indices(cx: LoweringContext, x, dim=None, keepdim=False):
        return indices(cx, x, dim, keepdim)[1]
    return with_values, only_indices


def numel(x: HloInstruction):
    n = 1
    for d in x.shape.dims:
        n = n * d
    return n


def _logical_reduce(opcode: str):
    def rule(cx: LoweringContext, x, dims=None, keepdim=False):
        if x.shape.element_type.name != "pred":
            x = cx.add("compare", [x, cx.full(0, x.shape)], {"direction": "NE"})
        return cx.convert(reduce(cx, x, dims, opcode, keepdim), cx.element_type)
    return rule


def _prod(cx: LoweringContext, x, dims=None, keepdim=False, *, dtype=None):
    et = cx.element_type
    return cx.convert(reduce(cx, cx.convert(x, _accumulation_type(et)), dims, "multiply", keepdim), et)


def _var(cx: LoweringContext, x, dims=None, *, correction=1, keepdim=False):
    et = cx.element_type
    acc = _accumulation_type(et)
    x = cx.convert(x, acc)
    dims = norm_dims(dims, x.shape.rank)
    count = cx.size_of(x, dims, acc)
    mean = _divide(cx, reduce(cx, x, dims, "add", True), count)
    centered = cx.add("subtract", [x, cx.broadcast_to(mean, x.shape.dims)])
    squares = reduce(cx, cx.add("multiply", [centered, centered]), dims, "add", keepdim)
    correction = 1 if correction is None else correction
    divisor = cx.add("subtract", [count, cx.constant(correction, acc)]) if correction else count
    return cx.convert(cx.add("divide", [squares, cx.broadcast_to(divisor, squares.shape.dims)]), et)


def _vector_norm(cx: LoweringContext, x, ord=2, dims=None, keepdim=False, *, dtype=None):
    """torch.linalg.vector_norm (torch.norm, F.normalize): max/min of |x| for ord ±inf, the count
    of nonzeros for 0, else (sum |x|^ord)^(1/ord), with ord 1 and 2 as sum and sqrt (no power), in
    f32 for halves."""
    et = cx.element_type
    acc = _accumulation_type(et)
    magnitude = cx.add("abs", [cx.convert(x, acc)])
    if ord in (math.inf, -math.inf):
        return cx.convert(reduce(cx, magnitude, dims, "maximum" if ord > 0 else "minimum", keepdim), et)
    if ord == 0:
        nonzero = cx.convert(cx.add("compare", [magnitude, cx.full(0, magnitude.shape)], {"direction": "NE"}), acc)
        return cx.convert(reduce(cx, nonzero, dims, "add", keepdim), et)
    if ord == 2:
        powered = cx.add("multiply", [magnitude, magnitude])
    elif ord == 1:
        powered = magnitude
    else:
        powered = cx.add("power", [magnitude, cx.full(ord, magnitude.shape)])
    total = reduce(cx, powered, dims, "add", keepdim)
    if ord == 2:
        total = cx.add("sqrt", [total])
    elif ord != 1:
        total = cx.add("power", [total, cx.full(1 / ord, total.shape)])
    return cx.convert(total, et)


def _var_mean(cx: LoweringContext, x, dims=None, *, correction=1, keepdim=False):
    """(var, mean), both of the result's type and shape (the mean is reduced once more: fusion
    merges the two sums over `x`)."""
    return [_var(cx, x, dims, correction=correction, keepdim=keepdim), _mean(cx, x, dims, keepdim)]


def softmax(cx: LoweringContext, x: HloInstruction, dim: int, log: bool = False,
            safe: bool = False) -> HloInstruction:
    """exp(x - max) / sum(exp(x - max)) along `dim` (log: x - max - log(sum)), in f32 for halves.
    `safe` (ATen's `_safe_softmax`, attention's): 0 on a row that is all -inf, found from the
    row's max, which the softmax computes anyway (the decomposition reduces the row once more)."""
    et = cx.element_type
    x = cx.convert(x, _accumulation_type(x.shape.element_type.name))
    dim = norm_dims(dim, x.shape.rank)[0]
    peak = cx.broadcast_to(reduce(cx, x, [dim], "maximum", True), x.shape.dims)
    shifted = cx.add("subtract", [x, peak])
    exp = cx.add("exponential", [shifted])
    total = cx.broadcast_to(reduce(cx, exp, [dim], "add", True), x.shape.dims)
    out = cx.add("subtract", [shifted, cx.add("log", [total])]) if log else cx.add("divide", [exp, total])
    if safe:
        masked = cx.add("compare", [peak, cx.full(-math.inf, peak.shape)], {"direction": "EQ"})
        out = cx.add("select", [masked, cx.full(0, out.shape), out])
    return cx.convert(out, et)


def _softmax_backward(cx: LoweringContext, grad, output, dim, _input_dtype):
    product = cx.add("multiply", [grad, output])
    total = cx.broadcast_to(reduce(cx, product, [dim], "add", True), grad.shape.dims)
    return cx.add("multiply", [output, cx.add("subtract", [grad, total])], shape=cx.shape)


def _log_softmax_backward(cx: LoweringContext, grad, output, dim, _input_dtype):
    total = cx.broadcast_to(reduce(cx, grad, [dim], "add", True), grad.shape.dims)
    return cx.add("subtract", [grad, cx.add("multiply", [cx.add("exponential", [output]), total])], shape=cx.shape)


def scan(cx: LoweringContext, x: HloInstruction, dim: int, computation, init) -> HloInstruction:
    """Inclusive scan of `x` along `dim` by the scalar `computation` from `init`: a reduce-window whose
    window is the whole dimension, padded low by size-1 with the identity (analysis/scan.py: the
    CPU's scan emitter computes it in O(n) a line, where it is its fusion's root)."""
    et = x.shape.element_type.name
    n = x.shape.dims[dim]
    if n == 0:  # (nothing to scan: a window of size 0 is not HLO)
        return x
    window = tuple(WindowDim(size=n, pad_lo=n - 1) if i == dim else WindowDim(size=1)
                   for i in range(x.shape.rank))
    return cx.add("reduce-window", [x, cx.constant(init, et)], {"window": window, "to_apply": computation},
                  shape=x.shape)


def _cumulative(opcode: str):
    """cumsum / cumprod: a `scan` by the reduction `opcode`."""
    def rule(cx: LoweringContext, x, dim, *, dtype=None):
        et = cx.element_type
        x = cx.convert(x, et)
        dim = norm_dims(dim, x.shape.rank)[0]
        return scan(cx, x, dim, cx.reducer(opcode, et), _init_value(opcode, et))
    return rule


def _cumulative_extremum(opcode: str):
    """cummax / cummin: (values, s64 indices) as ATen's CPU kernel (`cummax_cummin_helper`) gives
    them: walking the dimension, the running extremum takes an element that is NaN or compares
    >= (cummin: <=) to it, so ties and NaNs take the *last* index, and a NaN sticks.

    Two O(n) scans instead of one reduce-window over (value, index) pairs (which the scan emitter
    does not take: a variadic window is the elemental one, O(n²) a line): M = the running max (HLO
    maximum propagates NaN); the element j is a hit when x[j] == M[j] or x[j] is NaN; the index at i
    is the last hit j <= i (a max scan of the hits' positions). That is the kernel's: the last hit
    before i started the run of equal M that i is in (M only grows at a hit), and after a NaN
    only NaNs hit. The values are x at those indices, so -0.0 and NaN payloads come out as the
    kernel's (it stores the element it took, which `maximum` of ±0 does not say)."""
    def rule(cx: LoweringContext, x, dim):
        rank0 = x.shape.rank == 0
        if rank0:
            x = cx.reshape(x, [1])
        dim = norm_dims(dim, x.shape.rank)[0]
        if x.shape.dims[dim] == 0:
            return [x, cx.add("iota", attrs={"iota_dimension": dim}, shape=x.shape.with_element_type(
                primitive_type("s64")))]
        et = x.shape.element_type.name
        scanned = cx.convert(x, "u8") if et == "pred" else x  # (max/min of bytes, not of i1)
        st = scanned.shape.element_type.name
        running = scan(cx, scanned, dim, cx.reducer(opcode, st), _init_value(opcode, st))
        hit = cx.add("compare", [scanned, running], {"direction": "EQ"})
        if x.shape.element_type.is_float:
            hit = cx.add("or", [hit, cx.add("compare", [x, x], {"direction": "NE"})])
        iota = cx.add("iota", attrs={"iota_dimension": dim}, shape=x.shape.with_element_type(primitive_type("s64")))
        candidates = cx.add("select", [hit, iota, cx.full(-1, iota.shape)])
        indices = scan(cx, candidates, dim, cx.reducer("maximum", "s64"), _init_value("maximum", "s64"))
        values = gather_along(cx, x, dim, indices)
        if rank0:
            values, indices = cx.reshape(values, []), cx.reshape(indices, [])
        return [values, indices]
    return rule


def _log_add_exp(comp: HloComputation, a: HloInstruction, b: HloInstruction) -> HloInstruction:
    """log(exp(a) + exp(b)) as ATen's `_log_add_exp_helper`: max + log1p(exp(min - max)), NaN
    propagated, and a pair of equal infinities (both -inf: the empty sum; both +inf) itself."""
    scalar = a.shape
    pred = Shape.array(primitive_type("pred"), ())
    low = comp.add("minimum", [a, b], shape=scalar)
    high = comp.add("maximum", [a, b], shape=scalar)
    same_infinity = comp.add("and", [comp.add("compare", [low, high], {"direction": "EQ"}, shape=pred),
                                     comp.add("not", [comp.add("is-finite", [low], shape=pred)], shape=pred)],
                             shape=pred)
    spread = comp.add("log-plus-one", [comp.add("exponential", [comp.add("subtract", [low, high], shape=scalar)],
                                                shape=scalar)], shape=scalar)
    return comp.add("select", [same_infinity, high, comp.add("add", [spread, high], shape=scalar)], shape=scalar)


def _logcumsumexp(cx: LoweringContext, x, dim):
    """log(cumsum(exp(x))) without overflow: a `scan` whose combiner is ATen's log-add-exp (from
    -inf), accumulated in f32 for halves as ATen's CPU kernel does (`acc_type`). A global shift by
    the row's max is not enough: an early element far below the max would underflow to -inf."""
    et = cx.element_type
    if not x.shape.element_type.is_float:
        raise cx.error(f"logcumsumexp of {et} is not lowered")
    acc = _accumulation_type(et)
    x = cx.convert(x, acc)
    dim = norm_dims(dim, x.shape.rank)[0]
    if x.shape.rank == 0:
        return cx.convert(x, et)
    return cx.convert(scan(cx, x, dim, cx.binary_computation("logaddexp", acc, _log_add_exp), -math.inf), et)


# -- normalization -------------------------------------------------------------------------------------
def _normalize(cx: LoweringContext, x, dims, eps):
    """(x - mean) * rstd over `dims` in f32 for halves, with the keepdim mean and rstd."""
    acc = _accumulation_type(x.shape.element_type.name)
    x = cx.convert(x, acc)
    count = cx.size_of(x, dims, acc)
    mean = _divide(cx, reduce(cx, x, dims, "add", True), count)
    centered = cx.add("subtract", [x, cx.broadcast_to(mean, x.shape.dims)])
    var = _divide(cx, reduce(cx, cx.add("multiply", [centered, centered]), dims, "add", True), count)
    rstd = cx.add("rsqrt", [cx.add("add", [var, cx.full(eps, var.shape)])])
    return cx.add("multiply", [centered, cx.broadcast_to(rstd, x.shape.dims)]), mean, rstd


def _affine(cx: LoweringContext, y, weight, bias, channel_dim: int | None = None):
    """y * weight + bias, weight and bias over the trailing dims or along `channel_dim`."""
    for param, opcode in ((weight, "multiply"), (bias, "add")):
        if param is None:
            continue
        param = cx.convert(param, y.shape.element_type.name)
        if channel_dim is not None:
            param = cx.add("broadcast", [param], {"dimensions": (channel_dim,)}, shape=y.shape.with_element_type(
                y.shape.element_type))
        y = cx.add(opcode, [y, cx.broadcast_to(param, y.shape.dims)])
    return y


def _layer_norm(cx: LoweringContext, x, normalized_shape, weight, bias, eps):
    dims = tuple(range(x.shape.rank - len(normalized_shape), x.shape.rank))
    y, mean, rstd = _normalize(cx, x, dims, eps)
    out = cx.convert(_affine(cx, y, weight, bias), cx.element_type)
    stat = cx.shapes()[1]
    return [out, cx.convert(cx.reshape(mean, stat.dims), stat.element_type.name),
            cx.convert(cx.reshape(rstd, stat.dims), stat.element_type.name)]


def _group_norm(cx: LoweringContext, x, weight, bias, n, c, hw, groups, eps):
    grouped = cx.reshape(x, [n, groups, numel(x) // (n * groups) if isinstance(numel(x), int) else c // groups * hw])
    y, mean, rstd = _normalize(cx, grouped, (2,), eps)
    y = _affine(cx, cx.reshape(y, x.shape.dims), weight, bias, channel_dim=1)
    stat = cx.shapes()[1]
    return [cx.convert(y, cx.element_type), cx.convert(cx.reshape(mean, stat.dims), stat.element_type.name),
            cx.convert(cx.reshape(rstd, stat.dims), stat.element_type.name)]


def _channel(cx: LoweringContext, v, y):
    return cx.add("broadcast", [cx.convert(v, y.shape.element_type.name)], {"dimensions": (1,)}, shape=y.shape)


def _batch_norm_inference(cx: LoweringContext, x, weight, bias, mean, var, _momentum, eps):
    acc = _accumulation_type(x.shape.element_type.name)
    y = cx.convert(x, acc)
    rstd = cx.add("rsqrt", [cx.add("add", [cx.convert(var, acc), cx.full(eps, var.shape.with_element_type(
        y.shape.element_type))])])
    y = cx.add("multiply", [cx.add("subtract", [y, _channel(cx, mean, y)]), _channel(cx, rstd, y)])
    y = _affine(cx, y, weight, bias, channel_dim=1)
    shapes = cx.shapes()
    return [cx.convert(y, cx.element_type)] + [cx.full(0, s) for s in shapes[1:]]


def _batch_norm_training(cx: LoweringContext, x, weight, bias, running_mean, running_var, momentum, eps,
                         functional: bool):
    dims = tuple(i for i in range(x.shape.rank) if i != 1)
    y, mean, rstd = _normalize(cx, x, dims, eps)
    out = cx.convert(_affine(cx, y, weight, bias, channel_dim=1), cx.element_type)
    shapes = cx.shapes()
    flat = [x.shape.dims[1]]
    mean, rstd = cx.reshape(mean, flat), cx.reshape(rstd, flat)
    results = [out, cx.convert(mean, shapes[1].element_type.name), cx.convert(rstd, shapes[2].element_type.name)]
    if functional:
        acc = mean.shape.element_type.name
        count = cx.size_of(x, dims, acc)
        var = cx.add("divide", [cx.full(1, rstd.shape), cx.add("multiply", [rstd, rstd])])
        var = cx.add("subtract", [var, cx.full(eps, var.shape)])
        unbiased = cx.add("divide", [cx.add("multiply", [var, cx.broadcast_to(count, flat)]),
                                     cx.broadcast_to(cx.add("subtract", [count, cx.constant(1, acc)]), flat)])
        for stat, running in ((mean, running_mean), (unbiased, running_var)):
            old = cx.convert(running, acc)
            new = cx.add("add", [cx.add("multiply", [old, cx.full(1 - momentum, old.shape)]),
                                 cx.add("multiply", [stat, cx.full(momentum, old.shape)])])
            results.append(cx.convert(new, running.shape.element_type.name))
    return results


# -- pooling ----------------------------------------------------------------------------------------
def _window(cx: LoweringContext, x, kernel, stride, padding, dilation, out_dims, ceil_mode=False):
    """WindowDims for the spatial dims (the trailing len(kernel)); with ceil_mode the high padding
    grows to give PyTorch's output size `out_dims` (floor mode is HLO's own size rule)."""
    k = len(kernel)
    stride = stride or kernel
    expand = lambda v: list(v) * k if len(v) == 1 else list(v)  # noqa: E731
    kernel, stride, padding, dilation = expand(kernel), expand(stride), expand(padding), expand(dilation)
    window = [WindowDim(size=1)] * (x.shape.rank - k)
    for i in range(k):
        size_in, size_out = x.shape.dims[x.shape.rank - k + i], out_dims[x.shape.rank - k + i]
        span = (size_out - 1) * stride[i] + (kernel[i] - 1) * dilation[i] + 1
        hi = span - size_in - padding[i] if ceil_mode else padding[i]
        window.append(WindowDim(size=kernel[i], stride=stride[i], pad_lo=padding[i], pad_hi=hi,
                                rhs_dilate=dilation[i]))
    return tuple(window)


def max_pool(cx: LoweringContext, x, kernel, stride=(), padding=(0,), dilation=(1,), ceil_mode=False):
    window = _window(cx, x, kernel, stride, padding, dilation, cx.shape.dims, ceil_mode)
    et = cx.element_type
    out = cx.add("reduce-window", [x, cx.constant(_init_value("maximum", et), et)],
                 {"window": window, "to_apply": cx.reducer("maximum", et)}, shape=cx.shape)
    return [out, None]  # (ops_pool adds the indices for the table; unused ones are dead code)


def _window_counts(cx: LoweringContext, x, window, out_shape, count_include_pad: bool, divisor_override):
    """Average pooling's divisor per output: `divisor_override`, else the number of elements its
    window covers (of the input, or of the input and its padding), in `x`'s type."""
    acc = x.shape.element_type.name
    if divisor_override:
        return cx.full(divisor_override, out_shape)
    zero = cx.constant(0, acc)
    ones = cx.full(1, x.shape)
    if count_include_pad:
        pads = tuple(PadDim(w.pad_lo, min(w.pad_lo, w.pad_hi)) for w in window)
        ones = cx.add("pad", [ones, cx.constant(1, acc)], {"padding": pads})
        window = tuple(WindowDim(size=w.size, stride=w.stride, pad_lo=0, pad_hi=w.pad_hi - min(w.pad_lo, w.pad_hi))
                       for w in window)
    return cx.add("reduce-window", [ones, zero], {"window": window, "to_apply": cx.reducer("add", acc)},
                  shape=out_shape)


def avg_pool(cx: LoweringContext, x, kernel, stride=(), padding=(0,), ceil_mode=False, count_include_pad=True,
             divisor_override=None):
    window = _window(cx, x, kernel, stride, padding, (1,), cx.shape.dims, ceil_mode)
    et = cx.element_type
    acc = _accumulation_type(et)
    x = cx.convert(x, acc)
    total = cx.add("reduce-window", [x, cx.constant(0, acc)], {"window": window, "to_apply": cx.reducer("add", acc)},
                   shape=cx.shape.with_element_type(x.shape.element_type))
    count = _window_counts(cx, x, window, total.shape, count_include_pad, divisor_override)
    return cx.convert(cx.add("divide", [total, count]), et)


def _avg_pool_backward(cx: LoweringContext, grad, x, kernel, stride, padding, ceil_mode, count_include_pad,
                       divisor_override):
    """avg_pool{2,3}d_backward (neither has a core-ATen decomposition: CNN training with average
    pooling fell back): the gradient divided by each window's divisor, then the transpose of the
    window sum, as XLA transposes a reduce-window sum: the divided gradient spread by stride - 1
    interior zeros and padded by k - 1 - pad low (and to the input's size high), summed over
    windows of k at stride 1."""
    window = _window(cx, x, kernel, stride, padding, (1,), grad.shape.dims, ceil_mode)
    et = cx.element_type
    acc = _accumulation_type(et)
    grad = cx.convert(grad, acc)
    share = cx.add("divide", [grad, _window_counts(cx, cx.convert(x, acc), window, grad.shape, count_include_pad,
                                                   divisor_override)])
    pads, spread = [], []
    for w, n, o in zip(window, x.shape.dims, grad.shape.dims):
        lo = w.size - 1 - w.pad_lo
        pads.append(PadDim(lo, n - 1 + w.pad_lo - (o - 1) * w.stride, w.stride - 1))
        spread.append(WindowDim(size=w.size))
    padded = cx.add("pad", [share, cx.constant(0, acc)], {"padding": tuple(pads)})
    total = cx.add("reduce-window", [padded, cx.constant(0, acc)],
                   {"window": tuple(spread), "to_apply": cx.reducer("add", acc)}, shape=x.shape.with_element_type(
                       primitive_type(acc)))
    return cx.convert(total, et)


_max_dim, _argmax = _arg_extremum("maximum")
_min_dim, _argmin = _arg_extremum("minimum")

OPS = {
    "aten.sum.dim_IntList": _sum, "aten.sum.default": _sum, "aten.mean.dim": _mean, "aten.mean.default": _mean,
    "aten.amax.default": _extremum("maximum"), "aten.amin.default": _extremum("minimum"),
    "aten.max.default": _extremum("maximum"), "aten.min.default": _extremum("minimum"),
    "aten.max.dim": _max_dim, "aten.min.dim": _min_dim, "aten.argmax.default": _argmax, "aten.argmin.default": _argmin,
    "aten.any.dim": _logical_reduce("or"), "aten.any.dims": _logical_reduce("or"),
    "aten.any.default": _logical_reduce("or"), "aten.all.dim": _logical_reduce("and"),
    "aten.all.default": _logical_reduce("and"),
    "aten.prod.dim_int": _prod, "aten.prod.default": _prod, "aten.var.correction": _var,
    "aten.var_mean.correction": _var_mean,
    "aten.linalg_vector_norm.default": _vector_norm,
    "aten._softmax.default": lambda cx, x, dim, _half_to_float=False: softmax(cx, x, dim),
    "aten._log_softmax.default": lambda cx, x, dim, _half_to_float=False: softmax(cx, x, dim, log=True),
    "aten._safe_softmax.default": lambda cx, x, dim, dtype=None: softmax(cx, x, dim, safe=True),
    "aten._softmax_backward_data.default": _softmax_backward,
    "aten._log_softmax_backward_data.default": _log_softmax_backward,
    "aten.cumsum.default": _cumulative("add"), "aten.cumprod.default": _cumulative("multiply"),
    "aten.cummax.default": _cumulative_extremum("maximum"), "aten.cummin.default": _cumulative_extremum("minimum"),
    "aten.logcumsumexp.default": _logcumsumexp,
    "aten.native_layer_norm.default": _layer_norm, "aten.native_group_norm.default": _group_norm,
    "aten._native_batch_norm_legit_no_training.default": _batch_norm_inference,
    "aten._native_batch_norm_legit_functional.default":
        lambda cx, x, w, b, rm, rv, training, momentum, eps: (
            _batch_norm_training(cx, x, w, b, rm, rv, momentum, eps, True) if training
            else _batch_norm_inference(cx, x, w, b, rm, rv, momentum, eps) + [rm, rv]),
    "aten._native_batch_norm_legit.no_stats":
        lambda cx, x, w, b, training, momentum, eps: _batch_norm_training(cx, x, w, b, None, None, momentum, eps,
                                                                          False),
    "aten.avg_pool2d.default": avg_pool, "aten.avg_pool1d.default": avg_pool, "aten.avg_pool3d.default": avg_pool,
    "aten.avg_pool2d_backward.default": _avg_pool_backward, "aten.avg_pool3d_backward.default": _avg_pool_backward,
}
