"""The schedule of a matmul on a GPU target (issue 17 item 4), the one `schedule_for(gpu=target)`
gives when none is forced:

- bf16 or f16 operands (both the same) with f32 accumulation (any result type but f64): mma.sync
  m16n8k16 over warps of 64 x 64 (16 accumulator fragments of 4 f32 per thread), fed by ldmatrix
  from a cp.async ring, the largest of these that the arch's shared memory holds
  (`Target.max_shared_memory_bytes`):
  - `MMA_WIDE`, 128 x 256 x 64 over 2 x 4 warps, 3 stages (144 KiB: sm_80, sm_90), where the
    problem has at least a wave of its blocks (one per SM); else
  - `MMA_DEEP`, 128 x 128 x 64 over 2 x 2 warps, 3 stages (96 KiB: sm_80 to sm_90); else
  - `MMA_SCHEDULE`, 128 x 128 x 32 over 2 x 2 warps, 3 stages (48 KiB, static: every arch; the
    tile of Triton's and CUTLASS's sm_80 defaults).
  Operands that do not allow 16-byte copies are staged synchronously. Edges are masked, so every
  size takes them.
- anything else (f32, f64, mixed): `simt_schedule`, 32 x 32 block tiles, one thread each with a
  4 x 4 register block: correct, not fast (a tf32 or SIMT-warp schedule is not built), which is
  why cuBLAS stays the cuda backend's default (`--gemm library`).

Never chosen here: sm_90a's wgmma (`MatmulSchedule.wgmma`, codegen/schedule/use_wgmma.py), which is
exact in the SIMT simulation and accepted by ptxas but has not run on hardware; a wrong default
would give silently wrong answers. It is for schedules asked for explicitly.

The order is measured: `benchmarks/gemm_cuda.py --sweep` over `MMA_CANDIDATES` on an H100
(benchmarks/results/cuda-h100.md). At 8192^3 bf16 the wide block took 2.69 ms against 3.55 for
`MMA_SCHEDULE` and 2.87 for the deep one; at 4096^3 0.37, 0.42 and 0.38 ms.
"""

from __future__ import annotations

from hlocc.codegen.schedule.builder import MatmulSchedule
from hlocc.codegen.schedule.set_operand_layout import staged_bytes

MMA_SCHEDULE = MatmulSchedule(mc=128, nc=128, kc=32, parallel=True, warp_grid=(2, 2), warp_tile=(64, 64), stages=3)
MMA_ELEMENTS = ("bf16", "f16")


def _mma(mc: int, nc: int, kc: int, grid: tuple[int, int], stages: int) -> MatmulSchedule:
    return MatmulSchedule(mc=mc, nc=nc, kc=kc, parallel=True, warp_grid=grid,
                          warp_tile=(mc // grid[0], nc // grid[1]), stages=stages)


MMA_CANDIDATES: tuple[MatmulSchedule, ...] = (
    MMA_SCHEDULE,
    _mma(128, 128, 32, (2, 4), 3),  # 8 warps of 64 x 32
    _mma(128, 128, 32, (4, 2), 3),  # 8 warps of 32 x 64
    _mma(128, 128, 32, (2, 2), 2),  # two blocks' rings in the shared memory of one
    _mma(128, 128, 16, (2, 2), 6),  # a deeper ring of thinner K blocks
    _mma(128, 128, 16, (2, 4), 6),
    _mma(128, 256, 32, (2, 4), 2),  # 8 warps of 64 x 64 over a wider block
    _mma(256, 128, 32, (4, 2), 2),
    _mma(128, 256, 16, (2, 4), 4),
    _mma(256, 128, 16, (4, 2), 4),
    _mma(64, 128, 32, (2, 2), 4),
    _mma(128, 64, 32, (2, 2), 4),
    _mma(64, 64, 64, (2, 2), 3),
    # past 48 KiB: dynamic shared memory (sm_80 and sm_90 allow 163 and 227 KiB a block)
    _mma(128, 128, 32, (2, 2), 4),
    _mma(128, 128, 32, (2, 2), 5),
    _mma(128, 128, 64, (2, 2), 3),
    _mma(128, 128, 64, (2, 2), 4),
    _mma(128, 128, 64, (2, 4), 4),
    _mma(128, 256, 32, (2, 4), 3),
    _mma(128, 256, 32, (2, 4), 4),
    _mma(128, 256, 64, (2, 4), 3),
    _mma(256, 128, 64, (4, 2), 3),
)
"""The legal points (fragments within `FRAGMENT_REGISTERS`; 48 KiB of static shared memory, or up
to 144 KiB of dynamic) that benchmarks/gemm_cuda.py --sweep times on a GPU: the space a GPU tuner
would search."""


def shared_bytes(schedule: MatmulSchedule) -> int:
    """The shared memory of a schedule's cp.async ring (bf16/f16 tiles of the full K block)."""
    return staged_bytes(schedule.mc, schedule.nc, schedule.kc, max(schedule.stages, 1))


def simt_schedule(sizes: list[int] | tuple[int, ...]) -> MatmulSchedule:
    _, m, n, k = sizes
    return MatmulSchedule(mc=32, nc=32, kc=max(k, 1), mr=max(1, min(4, m)), nr=max(1, min(4, n)), parallel=True)


MMA_WIDE = _mma(128, 256, 64, (2, 4), 3)
MMA_DEEP = _mma(128, 128, 64, (2, 2), 3)


def gpu_schedule(sizes: list[int] | tuple[int, ...], element_types: tuple[str, ...],
                 max_shared: int = 48 << 10, sm_count: int = 132) -> MatmulSchedule:
    """The schedule of a (B, M, N, K) matmul on a GPU whose blocks may have `max_shared` bytes of
    shared memory, with `sm_count` SMs (module doc)."""
    lhs, rhs, out = element_types
    if lhs == rhs and lhs in MMA_ELEMENTS and out != "f64":  # an f64 result accumulates in f64
        if shared_bytes(MMA_WIDE) <= max_shared and MMA_WIDE.blocks(list(sizes)) >= sm_count:
            return MMA_WIDE
        return MMA_DEEP if shared_bytes(MMA_DEEP) <= max_shared else MMA_SCHEDULE
    return simt_schedule(sizes)


__all__ = ["MMA_CANDIDATES", "MMA_DEEP", "MMA_SCHEDULE", "MMA_WIDE", "gpu_schedule", "shared_bytes", "simt_schedule"]
