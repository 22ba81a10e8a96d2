"""`transform.hlocc.pipeline_shared_copies`: stage a GPU matmul's operand tiles through a ring of
shared-memory buffers filled by `cp.async` (issue 17 item 4; MLIR's
`transform.nvgpu.pipeline_shared_memory_copies {depth = S}` with `create_async_groups`, and the
`insert_prefetch ... nb_prefetch` of seed 004, where the prefetch is the copy itself).

    transform.hlocc.pipeline_shared_copies %tiled stages S : !transform.any_op

Sets `stages` on matmul targets that have a warp layout: the lowering
(codegen/transforms/matmul/gpu_mma.py) then keeps S - 1 K blocks in flight while the mma.sync ops
consume one. The 16-byte copies need each staged row to be 8 contiguous, 16-byte aligned elements
in global memory; an operand whose layout does not give that (its contiguous dimension neither K
nor its own free dimension, or that extent not a multiple of 8) is staged by the synchronous copy
instead: a property of the data, not an illegal schedule.

Illegal: a target without `set_operand_layout`; S < 2; S stages of the tiles over the block's
shared memory (`SHARED_MEMORY_BYTES`).
"""

from __future__ import annotations

from xdsl.dialects.builtin import I64, IntegerAttr, i64
from xdsl.dialects.transform import TransformHandleType
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, prop_def

from hlocc.codegen.schedule.handles import ScheduleError, matmul_targets, warp_layout
from hlocc.codegen.schedule.set_operand_layout import SHARED_MEMORY_BYTES, staged_bytes, staged_k


@irdl_op_definition
class PipelineSharedCopiesOp(IRDLOperation):
    """Pipeline a GPU matmul's shared-memory staging over `stages` buffers (module doc)."""

    name = "transform.hlocc.pipeline_shared_copies"

    target = operand_def(TransformHandleType)
    stages = prop_def(IntegerAttr[I64])

    assembly_format = "$target `stages` $stages attr-dict `:` type($target)"

    def __init__(self, target, stages: int):
        super().__init__(operands=[target], properties={"stages": IntegerAttr(stages, i64)})


def run_pipeline_shared_copies(op: PipelineSharedCopiesOp, handle: object) -> tuple:
    stages = op.stages.value.data
    if stages < 2:
        raise ScheduleError(f"{op.name}: stages must be at least 2, found {stages}")
    targets = matmul_targets(op, handle)
    for target in targets:
        (wm, wn), (tm, tn) = warp_layout(op, target)
        shared = staged_bytes(wm * tm, wn * tn, staged_k(target), stages)
        if shared > SHARED_MEMORY_BYTES:
            raise ScheduleError(f"{op.name}: {stages} stages of the A and B tiles need {shared} bytes of shared "
                                f"memory, more than {SHARED_MEMORY_BYTES}")
    for target in targets:
        target.properties["stages"] = IntegerAttr(stages, i64)
    return ()


__all__ = ["PipelineSharedCopiesOp", "run_pipeline_shared_copies"]
