"""`transform.hlocc.set_operand_layout`: how a tiled `xla.matmul`'s block is spread over the warps
of a GPU block and over mma.sync instructions (seed 004's `set_operand_layout`; issue 17 item 4).

    transform.hlocc.set_operand_layout %tiled sg_layout [WM, WN] sg_data [TM, TN] inst_data [16, 8, 16]
        : !transform.any_op

`sg_layout`: the warp grid over the block's (m, n); `sg_data`: each warp's TM x TN part of the
output; `inst_data`: the instruction tile M x N x K (mma.sync m16n8k16, the only one built). Sets
`warp_grid` and `warp_tile` on the targets; `lower-matmul` then lowers them with
codegen/transforms/matmul/gpu_mma.py (operands staged in swizzled shared memory, ldmatrix,
mma.sync, the epilogue on the accumulator fragments), or, after `transform.hlocc.use_wgmma` (sg_layout
[4G, 1], sg_data [16, NC]: whole warpgroups), with gpu_wgmma.py's wgmma. *Differs from the seed*, whose op sets one
operand's layout per call (index = 0, 1, 2): here the anchor is the matmul and A's and B's
fragment layouts follow from C's (the lesson of the upstream revision: set anchors, propagate the
rest), so one call says it all.

Illegal, rejected before code generation (a `ScheduleError` naming the op):
- a target not tiled by `transform.hlocc.tile`, or already given a CPU register block or packing,
  or with a run-time M (`runtime_m`: the CPU's few-rows kernels only);
- operands other than bf16 or f16 (both the same), or an accumulator other than f32;
- inst_data other than [16, 8, 16]; TM not a multiple of 16 or TN of 8;
- warps that do not cover the block tile exactly (WM x TM = MC and WN x TN = NC, unless the
  problem is smaller than the block in that dimension); a K block that is not a multiple of 16;
- more than 1024 threads (32 x WM x WN);
- a block whose staged tiles (MC + NC) x KC x 2 bytes exceed `SHARED_MEMORY_BYTES`, or whose
  fragments (4 f32 per m16n8 accumulator tile, 4 words per A and 2 per B fragment of a k step)
  exceed `FRAGMENT_REGISTERS` 32-bit registers per thread.
"""

from __future__ import annotations

from xdsl.dialects.builtin import DenseArrayBase, Float32Type, i64
from xdsl.dialects.transform import TransformHandleType
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, prop_def

from hlocc.codegen.ir.matmul_ops import MatmulOp
from hlocc.codegen.schedule.handles import ScheduleError, matmul_targets, positive_sizes

MMA_TILE = (16, 8, 16)
"""mma.sync.m16n8k16: the instruction tile M x N x K."""

SHARED_MEMORY_BYTES = 227 << 10
"""Shared memory a block may have on the largest arch (sm_90's, with the launch's opt-in to dynamic
shared memory past the static 48 KiB: backends/cuda/ptx.py). A schedule over the limit of a
smaller arch compiles to a PtxError naming the kernel, its bytes and the arch's limit
(`Target.max_shared_memory_bytes`); the GPU's default choice fits the arch (gpu_choice.py)."""

FRAGMENT_REGISTERS = 200
"""32-bit registers per thread the fragments may take: 255 at most, less what addresses and the
epilogue need."""

WARP = 32


@irdl_op_definition
class SetOperandLayoutOp(IRDLOperation):
    """Spread tiled xla.matmul targets over warps and mma.sync tiles (module doc)."""

    name = "transform.hlocc.set_operand_layout"

    target = operand_def(TransformHandleType)
    sg_layout = prop_def(DenseArrayBase.constr(i64))
    sg_data = prop_def(DenseArrayBase.constr(i64))
    inst_data = prop_def(DenseArrayBase.constr(i64))

    assembly_format = ("$target `sg_layout` $sg_layout `sg_data` $sg_data `inst_data` $inst_data attr-dict `:` "
                       "type($target)")

    def __init__(self, target, sg_layout: list[int], sg_data: list[int], inst_data: tuple[int, ...] = MMA_TILE):
        super().__init__(operands=[target], properties={"sg_layout": DenseArrayBase.from_list(i64, sg_layout),
                                                        "sg_data": DenseArrayBase.from_list(i64, sg_data),
                                                        "inst_data": DenseArrayBase.from_list(i64, list(inst_data))})


def staged_k(target: MatmulOp) -> int:
    """KC: the K extent staged in shared memory per step (the K block, or all of K rounded up to
    the mma's 16)."""
    if target.k_block is not None:
        return target.k_block.value.data
    return max(MMA_TILE[2], -(-target.size_list[3] // MMA_TILE[2]) * MMA_TILE[2])


def staged_bytes(mc: int, nc: int, kc: int, stages: int = 1) -> int:
    """Shared memory of `stages` buffers of a block's staged A (MC x KC) and B (NC x KC) tiles of
    16-bit elements: what set_operand_layout, pipeline_shared_copies and the GPU choice check."""
    return stages * (mc + nc) * kc * 2


def fragment_registers(tm: int, tn: int) -> int:
    """32-bit registers of a warp tile's fragments per thread: accumulators, then A and B of one k step."""
    fm, fn = tm // MMA_TILE[0], tn // MMA_TILE[1]
    return 4 * fm * fn + 4 * fm + 2 * fn


def _element(target: MatmulOp, operand) -> str:
    t = operand.type.element_type
    return {"bf16": "bf16", "f16": "f16"}.get(str(t), str(t))


def check_layout(op: SetOperandLayoutOp, target: MatmulOp, grid: list[int], tile: list[int]) -> None:
    name = op.name
    if not target.offsets:
        raise ScheduleError(f"{name}: the target xla.matmul is not tiled; apply transform.hlocc.tile first")
    if target.register_block is not None or target.packed is not None:
        raise ScheduleError(f"{name}: the target already has a CPU register block or packing")
    if target.runtime_m is not None:
        raise ScheduleError(f"{name}: a run-time M (runtime_m) is not built in the GPU schedule")
    elements = {_element(target, target.lhs), _element(target, target.rhs)}
    if len(elements) != 1 or not elements <= {"bf16", "f16"}:
        raise ScheduleError(f"{name}: mma.sync m16n8k16 multiplies bf16 or f16 operands of one type, found "
                            f"{' and '.join(sorted(elements))}")
    if not isinstance(target.acc_type, Float32Type):
        raise ScheduleError(f"{name}: mma.sync accumulates in f32, the matmul in {target.acc_type}")
    inst = list(op.inst_data.get_values())
    if inst != list(MMA_TILE):
        raise ScheduleError(f"{name}: inst_data must be {list(MMA_TILE)} (mma.sync m16n8k16), found {inst}")
    tm, tn = tile
    if tm % MMA_TILE[0] or tn % MMA_TILE[1]:
        raise ScheduleError(f"{name}: sg_data {tile} is not a multiple of the instruction's {list(MMA_TILE[:2])}")
    _, mc, nc, _ = target.size_list
    _, m_total, n_total, _ = target.problem_sizes
    for what, warps, per, block, total in (("m", grid[0], tm, mc, m_total), ("n", grid[1], tn, nc, n_total)):
        cover = warps * per
        if cover != block and not (block == total and cover > block):
            raise ScheduleError(f"{name}: sg_layout x sg_data covers {cover} along {what}, but the block tile is "
                                f"{block}")
    kc = staged_k(target)
    if kc % MMA_TILE[2]:
        raise ScheduleError(f"{name}: the K block {kc} is not a multiple of the instruction's K ({MMA_TILE[2]})")
    threads = WARP * grid[0] * grid[1]
    if threads > 1024:
        raise ScheduleError(f"{name}: sg_layout {grid} is {threads} threads, more than a block's 1024")
    shared = staged_bytes(grid[0] * tm, grid[1] * tn, kc)
    if shared > SHARED_MEMORY_BYTES:
        raise ScheduleError(f"{name}: the staged A and B tiles need {shared} bytes of shared memory, more than "
                            f"{SHARED_MEMORY_BYTES}")
    registers = fragment_registers(tm, tn)
    if registers > FRAGMENT_REGISTERS:
        raise ScheduleError(f"{name}: a {tm}x{tn} warp tile needs {registers} registers per thread for its "
                            f"fragments, more than {FRAGMENT_REGISTERS}")


def run_set_operand_layout(op: SetOperandLayoutOp, handle: object) -> tuple:
    grid = positive_sizes(op, "sg_layout [WM, WN]", list(op.sg_layout.get_values()), 2)
    tile = positive_sizes(op, "sg_data [TM, TN]", list(op.sg_data.get_values()), 2)
    targets = matmul_targets(op, handle)
    for target in targets:
        check_layout(op, target, grid, tile)
    for target in targets:
        target.properties["warp_grid"] = DenseArrayBase.from_list(i64, grid)
        target.properties["warp_tile"] = DenseArrayBase.from_list(i64, tile)
    return ()


__all__ = ["FRAGMENT_REGISTERS", "MMA_TILE", "SHARED_MEMORY_BYTES", "SetOperandLayoutOp", "fragment_registers",
           "staged_bytes",
           "run_set_operand_layout", "staged_k"]
