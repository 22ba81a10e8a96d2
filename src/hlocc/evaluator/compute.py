"""Reference evaluation of HLO's compute ops: reductions (reduce, reduce-window,
select-and-scatter), map and scan here; sort/topk, dot, convolution, linear algebra, fft,
batch-norm and the random ops in their sibling modules, imported below so that importing this
module registers every compute op's evaluation.

Semantics follow XLA's operation semantics (docs/operation_semantics.md). Sub-computations
(`to_apply`, `select`, `scatter`) are elementwise on scalars, so they are always called on whole
arrays through `ev.call`; no evaluation loops over elements in Python.
"""

from __future__ import annotations

import math

import numpy as np

from hlocc.errors import UnsupportedError
from hlocc.evaluator import convolution, dot, linalg, normalization, random, sorting  # noqa: F401  (registration)
from hlocc.evaluator.reduction import FAST_COMBINERS, accumulation_dtype, as_array_list, fast_combiner, reduce_arrays
from hlocc.evaluator.windows import window_view
from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.opcodes import register_evaluator


def _result_dtypes(instr: HloInstruction) -> list[np.dtype]:
    return [leaf.dtype for leaf in instr.shape.leaves()]


def _pack(instr: HloInstruction, results: list[np.ndarray]):
    return tuple(results) if instr.shape.is_tuple else results[0]


@register_evaluator("reduce")
def evaluate_reduce(instr: HloInstruction, operands: list, ev):
    """reduce(in_0..in_{N-1}, init_0..init_{N-1}), dimensions=D, to_apply=f: each output element
    is f folded over the input elements that share its kept coordinates, with the init values
    folded in once; the result is a tuple when N > 1 (see reduction.py for the strategies)."""
    n = len(operands) // 2
    axes = tuple(sorted(instr.attrs["dimensions"]))
    results = reduce_arrays(ev, instr.to_apply, operands[:n], axes, operands[n:], _result_dtypes(instr))
    return _pack(instr, results)


@register_evaluator("reduce-window")
def evaluate_reduce_window(instr: HloInstruction, operands: list, ev):
    """reduce-window(in_0..in_{N-1}, init_0..init_{N-1}), window=W, to_apply=f: for every window
    position, the init values folded with the input elements the window covers. Taps that fall
    on edge padding or base-dilation holes are skipped (as XLA's CPU backend and HloEvaluator
    do; this equals padding with the init value when the init is f's identity)."""
    n = len(operands) // 2
    window = instr.attrs.get("window", ())
    inputs, inits = [np.asarray(x) for x in operands[:n]], operands[n:]
    scan = _scan_axis(window, inputs[0].shape)
    if scan is not None:
        return _pack(instr, _cumulative(ev, instr.to_apply, inputs, inits, *scan, _result_dtypes(instr)))
    views = [window_view(x, window, np.asarray(i)) for x, i in zip(inputs, inits)]
    valid = window_view(np.ones(inputs[0].shape, dtype=bool), window, False)
    rank = inputs[0].ndim
    axes = tuple(range(rank, 2 * rank))
    mask = None if valid.all() else valid
    results = reduce_arrays(ev, instr.to_apply, views, axes, inits, _result_dtypes(instr), mask)
    return _pack(instr, results)


def _scan_axis(window, dims) -> tuple[int, bool] | None:
    """(axis, reverse) when `window` is cumulative along one axis of an operand of `dims` (JAX's
    cumsum/cumprod/cummax: a window as long as the axis padded by its length - 1 before it, or
    after it for a reverse scan; stride and dilations 1; every other dimension a window of 1)."""
    found = None
    for d, (w, n) in enumerate(zip(window, dims)):
        if (w.stride, w.lhs_dilate, w.rhs_dilate, w.reversal) != (1, 1, 1, False):
            return None
        if (w.size, w.pad_lo, w.pad_hi) == (1, 0, 0):
            continue
        if found is not None or n < 2 or w.size != n or (w.pad_lo, w.pad_hi) not in ((n - 1, 0), (0, n - 1)):
            return None
        found = (d, w.pad_lo == 0)
    return found


def _cumulative(ev, comp, inputs: list, inits, axis: int, reverse: bool, dtypes) -> list[np.ndarray]:
    """A cumulative reduce-window (`_scan_axis`) in O(n log n) instead of a window per element
    (a cumsum of 10^6 elements would otherwise take 10^12 steps and n^2 memory): the prefix
    reductions along `axis` (suffix ones when `reverse`), each folded with the init value. A fast
    combiner (reduction.py) uses the ufunc's sequential `accumulate`, the order the cpu backend's
    scan emitter folds in; another uses a Hillis-Steele scan of `log2 n` whole-array calls
    (the combiner is associative, as XLA assumes)."""
    opcode = fast_combiner(comp) if len(inputs) == 1 else None
    xs = [np.flip(x, axis) if reverse else x for x in inputs]
    with np.errstate(all="ignore"):
        if opcode is not None and comp.root.shape.dtype == xs[0].dtype:
            ufunc, acc = FAST_COMBINERS[opcode], accumulation_dtype(xs[0].dtype)
            runs = [ufunc(np.asarray(inits[0]).astype(acc), ufunc.accumulate(xs[0].astype(acc), axis=axis, dtype=acc))
                    .astype(xs[0].dtype)]
        else:
            runs = [np.array(x, dtype=dt) for x, dt in zip(xs, dtypes)]
            length, step = runs[0].shape[axis], 1
            while step < length:
                head = [r.take(range(step, length), axis) for r in runs]
                tail = [r.take(range(0, length - step), axis) for r in runs]
                combined = as_array_list(ev.call(comp, tail + head), len(runs), head[0].shape, dtypes)
                runs = [np.concatenate([r.take(range(step), axis), c], axis) for r, c in zip(runs, combined)]
                step *= 2
            inits = [np.broadcast_to(np.asarray(i, dtype=dt), runs[0].shape) for i, dt in zip(inits, dtypes)]
            runs = as_array_list(ev.call(comp, inits + runs), len(runs), runs[0].shape, dtypes)
    return [np.array(np.flip(r, axis) if reverse else r) for r in runs]


def _select_in_windows(ev, select, operand: np.ndarray, window) -> np.ndarray:
    """For each window position, the flat operand index that `select` picks (-1 when the window
    covers only padding). Taps are visited in row-major order; the current pick `c` is replaced
    by a later tap `t` exactly when `select(c, t)` is false, as in XLA's evaluator."""
    flat_index = np.arange(operand.size, dtype=np.int64).reshape(operand.shape)
    taps = window_view(flat_index, window, -1)
    out_shape = taps.shape[:operand.ndim]
    # The tap count is given, not `-1`: numpy cannot infer it when a window-position dim is 0.
    taps = taps.reshape(out_shape + (math.prod(taps.shape[operand.ndim:]),))
    flat = operand.reshape(-1)
    pick = taps[..., 0].copy()
    value = flat[np.maximum(pick, 0)]
    with np.errstate(all="ignore"):
        for k in range(1, taps.shape[-1]):
            cand = taps[..., k]
            cand_value = flat[np.maximum(cand, 0)]
            keep = np.broadcast_to(np.asarray(ev.call(select, [value, cand_value]), dtype=bool), out_shape)
            take = (pick < 0) | ((cand >= 0) & ~keep)
            pick = np.where(take, cand, pick)
            value = np.where(take, cand_value, value)
    return pick


@register_evaluator("select-and-scatter")
def evaluate_select_and_scatter(instr: HloInstruction, operands: list, ev):
    """select-and-scatter(operand, source, init), window=W, select=s, scatter=c: the output has
    the operand's shape, filled with init; for each window position (in row-major order) the
    element picked by `s` (padding is never picked) receives `c(output, source[position])`.
    An element picked by several windows combines their source values in window order."""
    operand, source, init = (np.asarray(v) for v in operands)
    picks = _select_in_windows(ev, instr.attrs["select"], operand, instr.attrs["window"]).reshape(-1)
    values = source.reshape(-1)
    valid = picks >= 0
    picks, values = picks[valid], values[valid]
    order = np.argsort(picks, kind="stable")
    picks, values = picks[order], values[order]
    # Rank of each pick among the picks of the same element: updates of one rank hit distinct
    # elements, so each rank is one vectorised call of the scatter computation.
    positions = np.arange(picks.size)
    starts = np.r_[True, picks[1:] != picks[:-1]] if picks.size else np.zeros(0, bool)
    rank = positions - np.maximum.accumulate(np.where(starts, positions, 0)) if picks.size else positions
    out = np.full(operand.size, init, dtype=instr.shape.dtype)
    with np.errstate(all="ignore"):
        for r in range(int(rank.max()) + 1 if rank.size else 0):
            sel = rank == r
            targets = picks[sel]
            combined = ev.call(instr.attrs["scatter"], [out[targets], values[sel]])
            out[targets] = as_array_list(combined, 1, targets.shape, [out.dtype])[0]
    return out.reshape(operand.shape)


@register_evaluator("map")
def evaluate_map(instr: HloInstruction, operands: list, ev):
    """map(in_0..in_{N-1}), to_apply=f: f applied to the elements at each index."""
    shape = tuple(instr.shape.dims)
    with np.errstate(all="ignore"):
        result = ev.call(instr.to_apply, [np.asarray(o) for o in operands])
    return np.array(np.broadcast_to(np.asarray(result, dtype=instr.shape.dtype), shape))


@register_evaluator("scan")
def evaluate_scan(instr: HloInstruction, operands: list, ev):
    raise UnsupportedError("scan is not implemented by the reference evaluator (hlocc has no precise "
                           "statement of its operation semantics yet)")
