"""`transform.hlocc.use_tma`: feed a wgmma matmul's shared tiles with TMA loads through a ring of
`stages` buffers guarded by mbarriers (sm_90a; issue 17 item 4; codegen/transforms/matmul/
gpu_wgmma_tma.py).

    transform.hlocc.use_tma %tiled stages S : !transform.any_op

After `use_wgmma`. Sets `tma_stages` on the targets: one producer thread issues the TMA loads of K
block kt + S - 1 while the warpgroups multiply block kt, each stage with a *full* mbarrier (the
loads' bytes landed) and an *empty* one (every consumer thread done with it). An explicit choice of
a schedule only (`MatmulSchedule(..., wgmma=True, tma=True, stages=S)`), never the GPU's default
(codegen/schedule/gpu_choice.py): it has not run on hardware.

Whether TMA can address an operand (each of its dimensions one of b, m or n, k; rows 16-byte
aligned: its contiguous extent a multiple of 8 elements) is a property of the data: a matmul whose
operands do not allow it is staged by gpu_wgmma.py's synchronous copies instead.

Illegal (a `ScheduleError` naming the op): a target without `use_wgmma`; S < 1; a block tile MC x NC
or K block not a multiple of 64 or over 256 (a TMA box holds at most 256 rows; the 128-byte swizzle
row is 64 elements of 16 bits); a run-time M; S stages of the A and B tiles and their 2S mbarriers
over `SHARED_MEMORY_BYTES`.
"""

from __future__ import annotations

from xdsl.dialects.builtin import I64, IntegerAttr, i64
from xdsl.dialects.transform import TransformHandleType
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, prop_def

from hlocc.codegen.schedule.handles import ScheduleError, matmul_targets, warp_layout
from hlocc.codegen.schedule.set_operand_layout import SHARED_MEMORY_BYTES, staged_bytes
from hlocc.codegen.schedule.use_wgmma import SWIZZLE_ROW, wgmma_k

MAX_BOX = 256
MBARRIER_BYTES = 8


def tma_shared_bytes(mc: int, nc: int, kc: int, stages: int) -> int:
    """Shared memory of a TMA ring: S stages of the tiles, and a full and an empty mbarrier each."""
    return staged_bytes(mc, nc, kc, stages) + 2 * stages * MBARRIER_BYTES


@irdl_op_definition
class UseTmaOp(IRDLOperation):
    """Stage a wgmma matmul's tiles by TMA into a ring of `stages` buffers (module doc)."""

    name = "transform.hlocc.use_tma"

    target = operand_def(TransformHandleType)
    stages = prop_def(IntegerAttr[I64])

    assembly_format = "$target `stages` $stages attr-dict `:` type($target)"

    def __init__(self, target, stages: int):
        super().__init__(operands=[target], properties={"stages": IntegerAttr(stages, i64)})


def run_use_tma(op: UseTmaOp, handle: object) -> tuple:
    stages = op.stages.value.data
    if stages < 1:
        raise ScheduleError(f"{op.name}: stages must be at least 1, found {stages}")
    targets = matmul_targets(op, handle)
    for target in targets:
        if target.wgmma is None:
            raise ScheduleError(f"{op.name}: the target does not use wgmma; apply transform.hlocc.use_wgmma first")
        if target.runtime_m is not None:
            raise ScheduleError(f"{op.name}: a run-time M is not built for TMA (its tensor maps are made for "
                                "static shapes)")
        (wm, _), (tm, tn) = warp_layout(op, target)
        mc, nc = wm * tm, tn
        kc = target.k_block.value.data if target.k_block is not None else wgmma_k(target)
        for what, size in (("MC", mc), ("NC", nc), ("the K block", kc)):
            if size % SWIZZLE_ROW or size > MAX_BOX:
                raise ScheduleError(f"{op.name}: {what} must be a multiple of {SWIZZLE_ROW} of at most {MAX_BOX} (TMA "
                                    f"boxes of 128-byte swizzled rows), found {size}")
        shared = tma_shared_bytes(mc, nc, kc, stages)
        if shared > SHARED_MEMORY_BYTES:
            raise ScheduleError(f"{op.name}: {stages} stages of the A and B tiles and their mbarriers need {shared} "
                                f"bytes of shared memory, more than {SHARED_MEMORY_BYTES}")
    for target in targets:
        target.properties["tma_stages"] = IntegerAttr(stages, i64)
    return ()


__all__ = ["UseTmaOp", "run_use_tma", "tma_shared_bytes"]
