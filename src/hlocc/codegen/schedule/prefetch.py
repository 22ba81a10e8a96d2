"""`transform.hlocc.insert_prefetch`: prefetch the B micro-panel `distance` k steps ahead in the
micro-kernel (seed 004's `insert_prefetch` with `nb_prefetch`, on the CPU; issue 17).

    transform.hlocc.insert_prefetch %tiled distance D : !transform.any_op

Sets `prefetch = D` on packed targets: each step of the micro-kernel's k loop issues
`xla.prefetch` (LLVM's prefetch intrinsic, `prefetcht0`) of the packed B panel D * NR elements
ahead. Past the panel's end it prefetches the next micro-panel, which the next register block
reads: harmless, a prefetch never faults. A is not prefetched: its micro-panel is MR elements per
step and stays in L1 across the block's columns.

Illegal: an unpacked target (the distance counts steps of the packed panel), D < 1.
"""

from __future__ import annotations

from xdsl.dialects.builtin import I64, IntegerAttr, i64
from xdsl.dialects.transform import TransformHandleType
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, prop_def

from hlocc.codegen.schedule.handles import ScheduleError, packed_targets


@irdl_op_definition
class InsertPrefetchOp(IRDLOperation):
    """Prefetch packed B panels ahead in the micro-kernel (module doc)."""

    name = "transform.hlocc.insert_prefetch"

    target = operand_def(TransformHandleType)
    distance = prop_def(IntegerAttr[I64])

    assembly_format = "$target `distance` $distance attr-dict `:` type($target)"

    def __init__(self, target, distance: int):
        super().__init__(operands=[target], properties={"distance": IntegerAttr(distance, i64)})


def run_insert_prefetch(op: InsertPrefetchOp, handle: object) -> tuple:
    distance = op.distance.value.data
    if distance < 1:
        raise ScheduleError(f"{op.name}: distance must be at least 1 k step, found {distance}")
    for target in packed_targets(op, handle):
        target.properties["prefetch"] = IntegerAttr(distance, i64)
    return ()


__all__ = ["InsertPrefetchOp", "run_insert_prefetch"]
