"""Reference evaluation of control flow (call, while, conditional, fusion, async and copy
start/done pairs), of the ops that only order or annotate values (opt-barrier, after-all,
add-dependency, domain), of device ids, and of collectives under hlocc's one-device model.

hlocc models a single replica and a single partition: a collective over a group of one device is
the identity (an all-reduce over one participant returns its operands), and a collective whose
declared result shape shows more than one participant cannot be evaluated. Host transfers
(infeed, outfeed, send, recv) and custom calls other than the identity annotations, "TopK"
(evaluator/sorting.py) and JAX's LAPACK calls (evaluator/lapack.py) are not supported.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from hlocc.errors import UnsupportedError
from hlocc.evaluator import lapack
from hlocc.evaluator.core import TOKEN, EvaluationError, Evaluator
from hlocc.evaluator.sorting import top_k, topk_custom_call_k
from hlocc.hlo import library_calls
from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.opcodes import register_evaluator
from hlocc.hlo.types import Shape


def zero_value(shape: Shape) -> Any:
    """A value of `shape` filled with zeros (tokens for token leaves); used for the context
    elements of start ops, which have no meaning in the evaluator."""
    if shape.is_tuple:
        return tuple(zero_value(s) for s in shape.tuple_shapes)
    if shape.is_token:
        return TOKEN
    return np.zeros(shape.dims, dtype=shape.dtype)


# -- calls and loops ---------------------------------------------------------------------------

@register_evaluator("call")
def eval_call(instr: HloInstruction, operands: list, ev: Evaluator) -> Any:
    return ev.call(instr.attrs["to_apply"], operands)


@register_evaluator("fusion")
def eval_fusion(instr: HloInstruction, operands: list, ev: Evaluator) -> Any:
    """The fused computation `calls` applied to the operands."""
    return ev.call(instr.attrs["calls"], operands)


@register_evaluator("while")
def eval_while(instr: HloInstruction, operands: list, ev: Evaluator) -> Any:
    """Apply `body` to the state while `condition` (a pred scalar) holds; fails past
    `ev.max_while_iterations` iterations."""
    condition, body = instr.attrs["condition"], instr.attrs["body"]
    state = operands[0]
    iterations = 0
    while bool(ev.call(condition, [state])):
        if iterations >= ev.max_while_iterations:
            raise EvaluationError(f"while loop '{instr.name}' did not finish within "
                                  f"{ev.max_while_iterations} iterations")
        state = ev.call(body, [state])
        iterations += 1
    return state


@register_evaluator("conditional")
def eval_conditional(instr: HloInstruction, operands: list, ev: Evaluator) -> Any:
    """A pred selector picks `true_computation` (operand 1) or `false_computation` (operand 2); an
    s32 selector picks `branch_computations[i]` applied to operand i+1, where an index outside
    [0, N) selects the last branch."""
    selector = np.asarray(operands[0])
    branches = instr.attrs.get("branch_computations")
    if branches is None:
        index = 0 if bool(selector) else 1
        branches = (instr.attrs["true_computation"], instr.attrs["false_computation"])
    else:
        index = int(selector)
        if not 0 <= index < len(branches):
            index = len(branches) - 1
    return ev.call(branches[index], [operands[1 + index]])


# -- ordering, annotation and ids --------------------------------------------------------------

@register_evaluator("opt-barrier", "domain", "add-dependency")
def eval_identity(instr: HloInstruction, operands: list, ev: Evaluator) -> Any:
    """Operand 0 unchanged (these ops only constrain scheduling or annotate sharding)."""
    return operands[0]


@register_evaluator("after-all")
def eval_after_all(instr: HloInstruction, operands: list, ev: Evaluator) -> Any:
    return TOKEN


@register_evaluator("replica-id")
def eval_replica_id(instr: HloInstruction, operands: list, ev: Evaluator) -> np.ndarray:
    return np.array(ev.replica_id, dtype=np.uint32)


@register_evaluator("partition-id")
def eval_partition_id(instr: HloInstruction, operands: list, ev: Evaluator) -> np.ndarray:
    return np.array(ev.partition_id, dtype=np.uint32)


# -- asynchronous pairs ------------------------------------------------------------------------

@register_evaluator("copy-start")
def eval_copy_start(instr: HloInstruction, operands: list, ev: Evaluator) -> tuple:
    """XLA's shape `(destination, source, u32[] context)`: the copy, the operand, a zero context."""
    operand = operands[0]
    return (np.array(operand, copy=True), operand, zero_value(instr.shape.tuple_shapes[2]))


@register_evaluator("copy-done")
def eval_copy_done(instr: HloInstruction, operands: list, ev: Evaluator) -> Any:
    """The destination (element 0) of the copy-start tuple."""
    return operands[0][0]


@register_evaluator("async-start")
def eval_async_start(instr: HloInstruction, operands: list, ev: Evaluator) -> tuple:
    """Evaluates the wrapped computation `calls` at once. The value follows the declared shape
    `((operands...), result, context...)`, contexts being zeros."""
    result = ev.call(instr.attrs["calls"], operands)
    contexts = tuple(zero_value(s) for s in instr.shape.tuple_shapes[2:])
    return (tuple(operands), result) + contexts


@register_evaluator("async-update")
def eval_async_update(instr: HloInstruction, operands: list, ev: Evaluator) -> Any:
    return operands[0]


@register_evaluator("async-done")
def eval_async_done(instr: HloInstruction, operands: list, ev: Evaluator) -> Any:
    """The result (element 1) of the async value."""
    return operands[0][1]


# -- unsupported -------------------------------------------------------------------------------

IDENTITY_CUSTOM_CALLS = frozenset({
    "annotate_device_placement",  # memory-space annotations (host offloading): the value itself
    "MoveToHost", "MoveToDevice",
    "Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape",  # SPMD markers: one device, one shard
    "xla.sdy.FuncResultSharding", "xla.sdy.GlobalToLocalShape", "xla.sdy.LocalToGlobalShape",  # Shardy's
    "LayoutConstraint",
})
"""Custom calls that only annotate their one operand; on a single device they return it unchanged."""


@register_evaluator("custom-call")
def eval_custom_call(instr: HloInstruction, operands: list, ev: Evaluator) -> Any:
    target = instr.attrs.get("custom_call_target", "")
    if (target in IDENTITY_CUSTOM_CALLS and len(operands) == 1 and not instr.shape.is_tuple
            and instr.operands[0].shape.dims == instr.shape.dims
            and instr.operands[0].shape.element_type == instr.shape.element_type):
        return operands[0]
    if target == "TopK":
        return top_k(np.asarray(operands[0]), topk_custom_call_k(instr))
    if (body := library_calls.expansion(instr)) is not None:  # XLA:GPU's cuBLAS calls
        return ev.call(body, operands)
    if lapack.is_lapack_call(instr):
        results = lapack.evaluate(instr, operands)
        return tuple(results) if instr.shape.is_tuple else results[0]
    if "python" in target and "callback" in target:
        raise UnsupportedError(f"custom-call '{instr.name}' calls back into Python ('{target}': jax.debug.print, "
                               "jax.debug.callback, jax.pure_callback or io_callback), which a compiled hlocc "
                               "program cannot do; remove the callback from the function hlocc compiles")
    raise UnsupportedError(f"unsupported custom-call target '{target}' (instruction '{instr.name}')")


@register_evaluator("infeed", "outfeed", "send", "recv", "send-done", "recv-done")
def eval_host_transfer(instr: HloInstruction, operands: list, ev: Evaluator) -> Any:
    raise UnsupportedError(f"'{instr.opcode}' is not supported: hlocc has no host transfer "
                           f"(instruction '{instr.name}')")


@register_evaluator("ragged-all-to-all")
def eval_ragged_all_to_all(instr: HloInstruction, operands: list, ev: Evaluator) -> Any:
    raise UnsupportedError(f"'ragged-all-to-all' is not supported by the evaluator "
                           f"(instruction '{instr.name}')")


# -- collectives on one device -----------------------------------------------------------------

def _one_device_result(instr: HloInstruction, operands: list, result_shape: Shape) -> Any:
    """The operands themselves (a tuple for several), provided `result_shape` says the group has
    one participant (each result shaped as its operand)."""
    operand_shapes = [o.shape for o in instr.operands]
    result_shapes = list(result_shape.tuple_shapes) if result_shape.is_tuple else [result_shape]
    if len(result_shapes) != len(operand_shapes) or any(
            r.dims != o.dims for r, o in zip(result_shapes, operand_shapes)):
        raise UnsupportedError(
            f"'{instr.opcode}' instruction '{instr.name}' has result shape {result_shape} for operands "
            f"{', '.join(str(s) for s in operand_shapes)}: it spans several devices, and hlocc models "
            f"a single replica and partition")
    return tuple(operands) if result_shape.is_tuple else operands[0]


@register_evaluator("all-reduce", "all-reduce-start", "all-gather", "reduce-scatter", "all-to-all",
                    "collective-broadcast")
def eval_single_device_collective(instr: HloInstruction, operands: list, ev: Evaluator) -> Any:
    """Over a group of one device each of these returns its operands unchanged (the reduction of
    one participant is its value; gathering or scattering over one piece is that piece)."""
    return _one_device_result(instr, operands, instr.shape)


def _declares_start_pair(instr: HloInstruction) -> bool:
    """True when a start op's shape is `(operands, results, ...)` rather than just the results:
    element 0 is the operand's shape (one operand) or a tuple of them (several)."""
    shape = instr.shape
    if not shape.is_tuple or len(shape.tuple_shapes) < 2:
        return False
    sent = shape.tuple_shapes[0]
    if len(instr.operands) > 1:
        return sent.is_tuple
    return not sent.is_tuple and sent.dims == instr.operands[0].shape.dims


@register_evaluator("all-gather-start")
def eval_all_gather_start(instr: HloInstruction, operands: list, ev: Evaluator) -> Any:
    """XLA's shape is `(operands, results)` (each a tuple when there are several operands); an
    older form declares just the results."""
    if not _declares_start_pair(instr):
        return _one_device_result(instr, operands, instr.shape)
    sent = tuple(operands) if len(operands) > 1 else operands[0]
    return (sent, _one_device_result(instr, operands, instr.shape.tuple_shapes[1]))


def _permute_keeps_own_data(instr: HloInstruction) -> bool:
    """True when `source_target_pairs` maps device 0 to itself (parsed from the raw text)."""
    pairs = instr.attrs.get("source_target_pairs")
    text = getattr(pairs, "text", str(pairs or ""))
    return any(int(s) == 0 and int(t) == 0 for s, t in re.findall(r"\{\s*(\d+)\s*,\s*(\d+)\s*\}", text))


def _permuted(instr: HloInstruction, operands: list, result_shape: Shape) -> Any:
    """Device 0's result of a collective-permute: its own data if it sends to itself, else zeros
    (XLA zero-fills the output of a device that no pair targets)."""
    if "slice_sizes" in instr.attrs or len(operands) == 4 and not result_shape.is_tuple:
        raise UnsupportedError(f"in-place collective-permute '{instr.name}' is not supported")
    if _permute_keeps_own_data(instr):
        return _one_device_result(instr, operands, result_shape)
    return zero_value(result_shape)


@register_evaluator("collective-permute")
def eval_collective_permute(instr: HloInstruction, operands: list, ev: Evaluator) -> Any:
    return _permuted(instr, operands, instr.shape)


@register_evaluator("collective-permute-start")
def eval_collective_permute_start(instr: HloInstruction, operands: list, ev: Evaluator) -> Any:
    """XLA's shape is `(operand, result, context...)`; contexts are zeros. Older dumps declare just
    the result shape."""
    if not instr.shape.is_tuple:
        return _permuted(instr, operands, instr.shape)
    shapes = instr.shape.tuple_shapes
    sent = tuple(operands) if len(operands) > 1 else operands[0]
    return (sent, _permuted(instr, operands, shapes[1])) + tuple(zero_value(s) for s in shapes[2:])


@register_evaluator("all-reduce-done")
def eval_all_reduce_done(instr: HloInstruction, operands: list, ev: Evaluator) -> Any:
    """all-reduce-start already holds the result."""
    return operands[0]


@register_evaluator("all-gather-done", "collective-permute-done")
def eval_collective_done(instr: HloInstruction, operands: list, ev: Evaluator) -> Any:
    """The result element (1) of the start tuple; an untupled start value is the result itself."""
    start_shape = instr.operands[0].shape
    if start_shape.is_tuple and len(start_shape.tuple_shapes) >= 2 and start_shape.tuple_shapes[1] == instr.shape:
        return operands[0][1]
    return operands[0]
