"""What every `transform.hlocc.*` op shares: its error type and the checks of its target handle.

A handle is xDSL's `OperationHandle` (a tuple of payload ops). xDSL does not track consumed
handles; hlocc's ops detect a handle to an op a previous transform replaced (it has no parent any
more) and say so, instead of acting on a detached op. xDSL's interpreter package is imported only
where a script runs (interpreter.py's `apply_schedule`), never at start-up.
"""

from __future__ import annotations

from xdsl.dialects.builtin import UnitAttr
from xdsl.ir import Operation

from hlocc.codegen.ir.matmul_ops import MatmulOp
from hlocc.errors import HloError


class ScheduleError(HloError):
    """An illegal schedule: the message names the transform op and the cause."""


def matmul_targets(op: Operation, handle: object) -> list[MatmulOp]:
    """The `xla.matmul` ops `handle` holds, or a ScheduleError naming `op`."""
    from xdsl.interpreters.transform import OperationHandle  # loaded by the interpreter running `op`

    if not isinstance(handle, OperationHandle):
        raise ScheduleError(f"{op.name}: the target is not an operation handle")
    if not handle.ops:
        raise ScheduleError(f"{op.name}: the target handle is empty (nothing matched)")
    for target in handle.ops:
        if not isinstance(target, MatmulOp):
            raise ScheduleError(f"{op.name}: expects xla.matmul targets, found {target.name}")
        if target.parent is None:
            raise ScheduleError(f"{op.name}: the target xla.matmul was replaced by an earlier transform "
                                "(use the handle that transform returned)")
    return list(handle.ops)


def warp_layout(op: Operation, target: MatmulOp) -> tuple[tuple[int, int], tuple[int, int]]:
    """((WM, WN), (TM, TN)): the warp grid and warp tile set_operand_layout gave `target`, or a
    ScheduleError naming `op`, which needs them."""
    if target.warp_grid is None or target.warp_tile is None:
        raise ScheduleError(f"{op.name}: the target has no warp layout; apply transform.hlocc.set_operand_layout "
                            "first")
    (wm, wn), (tm, tn) = target.warp_grid.get_values(), target.warp_tile.get_values()
    return (wm, wn), (tm, tn)


def positive_sizes(op: Operation, what: str, values: list[int], count: int) -> list[int]:
    if len(values) != count or any(v < 1 for v in values):
        raise ScheduleError(f"{op.name}: {what} must be {count} positive integers, found {values}")
    return values


def packed_targets(op: Operation, handle: object) -> list[MatmulOp]:
    """The `xla.matmul` targets of an op that refines a packed schedule (they must be packed)."""
    targets = matmul_targets(op, handle)
    for target in targets:
        if target.packed is None:
            raise ScheduleError(f"{op.name}: the target xla.matmul is not packed; apply transform.hlocc.pack first")
    return targets


def mark_packed(op: Operation, handle: object, flag: str) -> tuple:
    """Set the unit property `flag` on every packed `xla.matmul` target of `op` (a refinement the
    packed lowering reads: hoist_address, fuse_epilogue); no results."""
    for target in packed_targets(op, handle):
        target.properties[flag] = UnitAttr()
    return ()


__all__ = ["ScheduleError", "mark_packed", "matmul_targets", "packed_targets", "positive_sizes"]
