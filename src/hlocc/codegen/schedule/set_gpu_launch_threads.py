"""`transform.hlocc.set_gpu_launch_threads`: the threads of the GPU block that runs a matmul laid
out over warps (seed 004's `set_gpu_launch_threads`; issue 17 item 4).

    transform.hlocc.set_gpu_launch_threads %tiled threads [X, Y, Z] : !transform.any_op

hlocc's launch is one-dimensional and fixed when the kernel is emitted (the matmul emitter takes it
from the same schedule: `MatmulSchedule.threads`), so the op checks instead of overwriting: the
threads must be 32 x the warps of `set_operand_layout` (along x; Y = Z = 1) and the kernel's
thread id must range over exactly them. *Differs from the seed*, which overwrites `gpu.launch`
after `gpu-map-parallel-loops`: here the emitter and the schedule agree by construction, and a
script that disagrees is an error, not a silent relaunch.
"""

from __future__ import annotations

from xdsl.dialects import gpu
from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, i64
from xdsl.dialects.transform import TransformHandleType
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, prop_def

from hlocc.codegen.schedule.handles import ScheduleError, matmul_targets
from hlocc.codegen.schedule.set_operand_layout import WARP


@irdl_op_definition
class SetGpuLaunchThreadsOp(IRDLOperation):
    """Check the block's threads of matmul targets laid out over warps (module doc)."""

    name = "transform.hlocc.set_gpu_launch_threads"

    target = operand_def(TransformHandleType)
    threads = prop_def(DenseArrayBase.constr(i64))

    assembly_format = "$target `threads` $threads attr-dict `:` type($target)"

    def __init__(self, target, threads: list[int]):
        super().__init__(operands=[target], properties={"threads": DenseArrayBase.from_list(i64, threads)})


def _kernel_threads(target) -> int | None:
    fn = target.parent_op()
    while fn is not None and fn.name != "func.func":
        fn = fn.parent_op()
    for o in (fn.walk() if fn is not None else ()):
        if isinstance(o, gpu.ThreadIdOp):
            bounds = o.attributes.get("xla.range")
            return bounds.data[1].value.data + 1 if isinstance(bounds, ArrayAttr) else None
    return None


def run_set_gpu_launch_threads(op: SetGpuLaunchThreadsOp, handle: object) -> tuple:
    threads = list(op.threads.get_values())
    if len(threads) != 3 or threads[1:] != [1, 1] or threads[0] < 1:
        raise ScheduleError(f"{op.name}: threads must be [X, 1, 1] (hlocc launches one-dimensional blocks), "
                            f"found {threads}")
    for target in matmul_targets(op, handle):
        if target.warp_grid is None:
            raise ScheduleError(f"{op.name}: the target has no warp layout; apply "
                                "transform.hlocc.set_operand_layout first")
        wm, wn = target.warp_grid.get_values()
        if threads[0] != WARP * wm * wn:
            raise ScheduleError(f"{op.name}: {threads[0]} threads, but sg_layout [{wm}, {wn}] has {wm * wn} warps "
                                f"({WARP * wm * wn} threads)")
        kernel = _kernel_threads(target)
        if kernel != threads[0]:
            raise ScheduleError(f"{op.name}: the kernel was emitted for {kernel} threads per block, not "
                                f"{threads[0]} (the emitter's launch comes from MatmulSchedule.threads)")
    return ()


__all__ = ["SetGpuLaunchThreadsOp", "run_set_gpu_launch_threads"]
