"""`transform-interpreter`: runs the transform script (`transform.named_sequence @__transform_main`)
that a kernel module holds on the module's payload, then removes the script (xDSL 0.74's transform
interpreter, with hlocc's `transform.hlocc.*` ops registered; issue 17 step 2).

xDSL's own pass of that name builds its interpreter inside `apply`, so it cannot take more op
implementations; this one builds the same interpreter (xDSL's `TransformFunctions`: match,
tile_using_for, apply_registered_pass, named_sequence, yield) and adds `HloccTransformFunctions`.
A module without a script is left as it is, so the pass can run first in every pipeline. Unlike
MLIR's interpreter it erases the script after running it: the kernel pipeline after it lowers the
payload only.

An illegal schedule raises `ScheduleError` with the transform op's name and the cause; the payload
is not restored (xDSL's interpretation is not transactional: clone the module first to try
several schedules, as an autotuner must).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin, transform
from xdsl.interpreter import Interpreter, InterpreterFunctions, impl, register_impls
from xdsl.ir import Dialect
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from hlocc.codegen.schedule.fuse_epilogue import FuseEpilogueOp, run_fuse_epilogue
from hlocc.codegen.schedule.handles import ScheduleError
from hlocc.codegen.schedule.hoist_address import HoistAddressOp, run_hoist_address
from hlocc.codegen.schedule.microkernel import MicrokernelOp, run_microkernel
from hlocc.codegen.schedule.pack import PackOp, run_pack
from hlocc.codegen.schedule.parallelize import ParallelizeOp, run_parallelize
from hlocc.codegen.schedule.pipeline_shared_copies import PipelineSharedCopiesOp, run_pipeline_shared_copies
from hlocc.codegen.schedule.prefetch import InsertPrefetchOp, run_insert_prefetch
from hlocc.codegen.schedule.set_gpu_launch_threads import SetGpuLaunchThreadsOp, run_set_gpu_launch_threads
from hlocc.codegen.schedule.set_operand_layout import SetOperandLayoutOp, run_set_operand_layout
from hlocc.codegen.schedule.tile import TileOp, run_tile
from hlocc.codegen.schedule.use_tma import UseTmaOp, run_use_tma
from hlocc.codegen.schedule.use_wgmma import UseWgmmaOp, run_use_wgmma

ENTRY_POINT = "__transform_main"

HLOCC_TRANSFORM = Dialect("hlocc_transform", [TileOp, MicrokernelOp, ParallelizeOp, PackOp, InsertPrefetchOp,
                                                  HoistAddressOp, FuseEpilogueOp, SetOperandLayoutOp,
                                                  SetGpuLaunchThreadsOp, PipelineSharedCopiesOp, UseWgmmaOp,
                                                  UseTmaOp], [])
"""hlocc's transform ops. Registered under their own dialect name: xDSL's `transform` dialect is
loaded beside it, and a second dialect named `transform` cannot be."""


@register_impls
class HloccTransformFunctions(InterpreterFunctions):
    """The interpreter implementations of the `transform.hlocc.*` ops (one module per op)."""

    @impl(TileOp)
    def run_tile(self, interpreter: Interpreter, op: TileOp, args: tuple) -> tuple:
        return run_tile(op, args[0])

    @impl(MicrokernelOp)
    def run_microkernel(self, interpreter: Interpreter, op: MicrokernelOp, args: tuple) -> tuple:
        return run_microkernel(op, args[0])

    @impl(ParallelizeOp)
    def run_parallelize(self, interpreter: Interpreter, op: ParallelizeOp, args: tuple) -> tuple:
        return run_parallelize(op, args[0])

    @impl(PackOp)
    def run_pack(self, interpreter: Interpreter, op: PackOp, args: tuple) -> tuple:
        return run_pack(op, args[0])

    @impl(InsertPrefetchOp)
    def run_insert_prefetch(self, interpreter: Interpreter, op: InsertPrefetchOp, args: tuple) -> tuple:
        return run_insert_prefetch(op, args[0])

    @impl(HoistAddressOp)
    def run_hoist_address(self, interpreter: Interpreter, op: HoistAddressOp, args: tuple) -> tuple:
        return run_hoist_address(op, args[0])

    @impl(FuseEpilogueOp)
    def run_fuse_epilogue(self, interpreter: Interpreter, op: FuseEpilogueOp, args: tuple) -> tuple:
        return run_fuse_epilogue(op, args[0])

    @impl(SetOperandLayoutOp)
    def run_set_operand_layout(self, interpreter: Interpreter, op: SetOperandLayoutOp, args: tuple) -> tuple:
        return run_set_operand_layout(op, args[0])

    @impl(PipelineSharedCopiesOp)
    def run_pipeline_shared_copies(self, interpreter: Interpreter, op: PipelineSharedCopiesOp, args: tuple) -> tuple:
        return run_pipeline_shared_copies(op, args[0])

    @impl(UseWgmmaOp)
    def run_use_wgmma(self, interpreter: Interpreter, op: UseWgmmaOp, args: tuple) -> tuple:
        return run_use_wgmma(op, args[0])

    @impl(UseTmaOp)
    def run_use_tma(self, interpreter: Interpreter, op: UseTmaOp, args: tuple) -> tuple:
        return run_use_tma(op, args[0])

    @impl(SetGpuLaunchThreadsOp)
    def run_set_gpu_launch_threads(self, interpreter: Interpreter, op: SetGpuLaunchThreadsOp, args: tuple) -> tuple:
        return run_set_gpu_launch_threads(op, args[0])


def find_schedule(module: builtin.ModuleOp, entry_point: str = ENTRY_POINT) -> transform.NamedSequenceOp | None:
    for op in module.walk():
        if isinstance(op, transform.NamedSequenceOp) and op.sym_name.data == entry_point:
            return op
    return None


def _schedule_error(e: BaseException) -> ScheduleError | None:
    while e is not None:
        if isinstance(e, ScheduleError):
            return e
        e = e.__cause__ or e.__context__
    return None


def apply_schedule(ctx: Context, module: builtin.ModuleOp, entry_point: str = ENTRY_POINT) -> bool:
    """Run the module's transform script on it and erase the script; False when it has none.

    xDSL's transform interpreter is imported here, at the first schedule: its package imports every
    interpreter xDSL has (RISC-V, Snitch, PDL, ...), a third of a second that a program without a
    generated matmul should not pay at start-up."""
    schedule = find_schedule(module, entry_point)
    if schedule is None:
        return False
    from xdsl.interpreters.transform import OperationHandle, TransformFunctions
    from xdsl.transforms import get_all_passes

    interpreter = Interpreter(module)
    interpreter.register_implementations(TransformFunctions(ctx, get_all_passes()))
    interpreter.register_implementations(HloccTransformFunctions())
    try:
        interpreter.call_op(schedule, (OperationHandle(module),))
    except Exception as e:
        error = _schedule_error(e)
        if error is not None:
            raise ScheduleError(str(error)) from None
        raise
    holder = schedule.parent_op()
    Rewriter.erase_op(schedule)
    if isinstance(holder, builtin.ModuleOp) and holder is not module and not list(holder.ops):
        Rewriter.erase_op(holder)
    return True


@dataclass(frozen=True)
class TransformInterpreterPass(ModulePass):
    name = "transform-interpreter"

    entry_point: str = ENTRY_POINT

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        apply_schedule(ctx, op, self.entry_point)


__all__ = ["ENTRY_POINT", "HLOCC_TRANSFORM", "HloccTransformFunctions", "TransformInterpreterPass", "apply_schedule",
           "find_schedule"]
