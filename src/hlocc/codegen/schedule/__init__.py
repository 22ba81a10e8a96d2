"""Schedules for `xla.matmul` as transform scripts (issue 17, seed 004's method): xDSL 0.74's
transform dialect parses, prints and interprets them, and hlocc adds its own ops, one per module.

- handles.py: `ScheduleError` and the target checks every op shares;
- tile.py: `transform.hlocc.tile` (block tile MC x NC x KC: loops around a block matmul);
- microkernel.py: `transform.hlocc.microkernel` (register block MR x NR, k-unroll; register budget);
- parallelize.py: `transform.hlocc.parallelize` (the block loops become the kernel's blocks);
- pack.py: `transform.hlocc.pack` (A and B panels packed, zero-padded; bf16 pairs for vdpbf16ps);
- prefetch.py, hoist_address.py, fuse_epilogue.py: `transform.hlocc.insert_prefetch`,
  `hoist_address` and `fuse_epilogue`, refinements of a packed matmul;
- set_operand_layout.py, set_gpu_launch_threads.py, pipeline_shared_copies.py: the GPU schedule's
  warp layout (mma.sync m16n8k16), block threads and cp.async ring; use_wgmma.py: sm_90a's
  warpgroup MMA instead (an explicit choice only); gpu_choice.py: the schedule a GPU target gets;
- interpreter.py: the `transform-interpreter` kernel pass (xDSL's interpreter plus hlocc's ops);
- builder.py: `MatmulSchedule`, a schedule point as script text;
- choice.py: `schedule_for`, the schedule a matmul gets: forced, tuned (the CPU backend's tuner,
  `autotune_mode`) or the analytic model.

use_tma.py: the sm_90a wgmma schedule's tiles by TMA through an mbarrier ring (explicit only).
"""

from hlocc.codegen.schedule.builder import MatmulSchedule
from hlocc.codegen.schedule.choice import schedule_for, use_schedule
from hlocc.codegen.schedule.fuse_epilogue import FuseEpilogueOp
from hlocc.codegen.schedule.handles import ScheduleError
from hlocc.codegen.schedule.hoist_address import HoistAddressOp
from hlocc.codegen.schedule.interpreter import HLOCC_TRANSFORM, TransformInterpreterPass, apply_schedule
from hlocc.codegen.schedule.microkernel import MicrokernelOp
from hlocc.codegen.schedule.pack import PackOp
from hlocc.codegen.schedule.parallelize import ParallelizeOp
from hlocc.codegen.schedule.prefetch import InsertPrefetchOp
from hlocc.codegen.schedule.tile import TileOp

__all__ = ["HLOCC_TRANSFORM", "FuseEpilogueOp", "HoistAddressOp", "InsertPrefetchOp", "MatmulSchedule", "MicrokernelOp",
           "PackOp", "ParallelizeOp", "ScheduleError", "TileOp", "TransformInterpreterPass", "apply_schedule",
           "schedule_for", "use_schedule"]
