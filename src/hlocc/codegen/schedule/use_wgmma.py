"""`transform.hlocc.use_wgmma`: lower a GPU matmul with Hopper's warpgroup MMA (sm_90a) instead of
mma.sync (issue 17 item 4; codegen/transforms/matmul/gpu_wgmma.py).

    transform.hlocc.use_wgmma %tiled : !transform.any_op

After `set_operand_layout`, whose warp layout must be whole warpgroups stacked along m: sg_layout
[4G, 1] and sg_data [16, NC], i.e. G warpgroups of 64 rows (`wgmma.m64nNk16`) over a block tile of
MC = 64G rows and NC columns, N = NC. Sets `wgmma` on the targets. Only kernels compiled for
sm_90a may use it (backends/cuda/ptx.py refuses the others); it is an explicit choice of a schedule
(`MatmulSchedule.wgmma`), never the GPU's default (codegen/schedule/gpu_choice.py): it has not run
on hardware.

Illegal (a `ScheduleError` naming the op): a target without `set_operand_layout`; a layout that is
not whole warpgroups along m (sg_layout [4G, 1], sg_data [16, NC]); NC not a multiple of 8 in
[8, 256]; a cp.async ring (`pipeline_shared_copies`: not built for wgmma; its tiles are staged by
synchronous copies); staged tiles (K rounded up to the 64 elements of a 128-byte swizzle row) past
`SHARED_MEMORY_BYTES`.
"""

from __future__ import annotations

from xdsl.dialects.builtin import UnitAttr
from xdsl.dialects.transform import TransformHandleType
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def

from hlocc.codegen.schedule.handles import ScheduleError, matmul_targets, warp_layout
from hlocc.codegen.schedule.set_operand_layout import SHARED_MEMORY_BYTES, staged_bytes, staged_k

WGMMA_M = 64
"""Rows of one warpgroup's wgmma.m64nNk16."""

SWIZZLE_ROW = 64
"""16-bit elements of K in one 128-byte swizzled row: a wgmma tile's K block is a multiple of it."""


def wgmma_k(target) -> int:
    """The K block a wgmma tile stages: the schedule's, rounded up to whole 128-byte rows."""
    return -(-staged_k(target) // SWIZZLE_ROW) * SWIZZLE_ROW


@irdl_op_definition
class UseWgmmaOp(IRDLOperation):
    """Lower matmul targets with wgmma (module doc)."""

    name = "transform.hlocc.use_wgmma"

    target = operand_def(TransformHandleType)

    assembly_format = "$target attr-dict `:` type($target)"

    def __init__(self, target):
        super().__init__(operands=[target])


def run_use_wgmma(op: UseWgmmaOp, handle: object) -> tuple:
    targets = matmul_targets(op, handle)
    for target in targets:
        (wm, wn), (tm, tn) = warp_layout(op, target)
        if wn != 1 or wm % 4 or tm != WGMMA_M // 4:
            raise ScheduleError(f"{op.name}: wgmma needs whole warpgroups along m (sg_layout [4G, 1], sg_data "
                                f"[16, NC]), found sg_layout [{wm}, {wn}] sg_data [{tm}, {tn}]")
        if tn % 8 or not 8 <= tn <= 256:
            raise ScheduleError(f"{op.name}: wgmma.m64nNk16 needs N = NC a multiple of 8 in [8, 256], found {tn}")
        if target.stages is not None:
            raise ScheduleError(f"{op.name}: a cp.async ring (pipeline_shared_copies) is not built for wgmma; its "
                                "tiles are staged by synchronous copies")
        shared = staged_bytes(wm * tm, tn, wgmma_k(target))
        if shared > SHARED_MEMORY_BYTES:
            raise ScheduleError(f"{op.name}: the staged A and B tiles need {shared} bytes of shared memory, more "
                                f"than {SHARED_MEMORY_BYTES}")
    for target in targets:
        target.properties["wgmma"] = UnitAttr()
    return ()


__all__ = ["SWIZZLE_ROW", "WGMMA_M", "UseWgmmaOp", "run_use_wgmma", "wgmma_k"]
