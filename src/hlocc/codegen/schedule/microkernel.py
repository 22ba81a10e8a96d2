"""`transform.hlocc.microkernel`: the register block MR x NR and the k-unroll of a tiled
`xla.matmul` (BLIS's micro-kernel and its loops 2 and 1; issue 17).

    transform.hlocc.microkernel %tiled register_block [MR, NR] k_unroll U [row_tails] : !transform.any_op

Sets `register_block` and `k_unroll` on the targets; `lower-matmul` then walks the block in
MR x NR sub-blocks (loops 2 and 1), each accumulating its MR x NR values in registers across the
whole contraction (U steps of k per iteration, then the rest one by one) before the epilogue.
`row_tails` (packed schedules): where fewer than MR rows are left, a register block of that many
rows runs instead of MR rows of which the extra ones are computed and dropped: MR - 1 more
micro-kernels of code, for a product of a few rows (a run-time M of 2 with MR = 6 did 3x the
multiply-adds) at the cost of MR ones.

Illegal, rejected before code generation: a target that is not the result of
`transform.hlocc.tile`; MR or NR not dividing the block's MC or NC (a partial sub-block is only
allowed at the problem's edge); a register block that does not fit the vector registers of the
target (codegen/target.py `vector_isa`): with L f32 lanes per register, MR x ceil(NR/L)
accumulators + ceil(NR/L) B vectors + 1 A broadcast must fit (AVX-512: 16 lanes, 32 zmm; AVX2: 8
lanes, 16 ymm).
"""

from __future__ import annotations

import math

from xdsl.dialects.builtin import I64, DenseArrayBase, IntegerAttr, UnitAttr, i64
from xdsl.dialects.transform import TransformHandleType
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, opt_prop_def, prop_def

from hlocc.codegen.ir.matmul_ops import MatmulOp
from hlocc.codegen.schedule.handles import ScheduleError, matmul_targets, positive_sizes
from hlocc.codegen.target import vector_isa


def registers_needed(mr: int, nr: int, lanes: int | None = None) -> int:
    """Accumulators, B vectors and the A broadcast of an MR x NR f32 register block (`lanes`: the
    target's, by default)."""
    vectors = math.ceil(nr / (lanes or vector_isa().lanes))
    return mr * vectors + vectors + 1


@irdl_op_definition
class MicrokernelOp(IRDLOperation):
    """Set the register block of tiled xla.matmul targets (module doc)."""

    name = "transform.hlocc.microkernel"

    target = operand_def(TransformHandleType)
    register_block = prop_def(DenseArrayBase.constr(i64))
    k_unroll = prop_def(IntegerAttr[I64])
    row_tails = opt_prop_def(UnitAttr)

    assembly_format = ("$target `register_block` $register_block `k_unroll` $k_unroll (`row_tails` $row_tails^)? "
                       "attr-dict `:` type($target)")

    def __init__(self, target, mr: int, nr: int, k_unroll: int = 1, row_tails: bool = False):
        super().__init__(operands=[target], properties={"register_block": DenseArrayBase.from_list(i64, [mr, nr]),
                                                        "k_unroll": IntegerAttr(k_unroll, i64),
                                                        **({"row_tails": UnitAttr()} if row_tails else {})})


def check_microkernel(op: MicrokernelOp, target: MatmulOp, mr: int, nr: int) -> None:
    if not target.offsets:
        raise ScheduleError(f"{op.name}: the target xla.matmul is not tiled; apply transform.hlocc.tile first")
    _, mc, nc, _ = target.size_list
    _, m_total, n_total, _ = target.problem_sizes
    if (mc % mr and mc != m_total) or (nc % nr and nc != n_total):
        raise ScheduleError(f"{op.name}: register block {mr}x{nr} does not divide the block tile {mc}x{nc}")
    isa = vector_isa()
    need = registers_needed(mr, nr, isa.lanes)
    if need > isa.registers:
        vectors = math.ceil(nr / isa.lanes)
        raise ScheduleError(f"{op.name}: register block {mr}x{nr} needs {mr * vectors} accumulators + {vectors} B "
                            f"vectors + 1 broadcast = {need} vector registers, more than the "
                            f"{isa.registers} the target has ({isa.name}: {isa.lanes} f32 lanes a register)")


def run_microkernel(op: MicrokernelOp, handle: object) -> tuple:
    mr, nr = positive_sizes(op, "register_block [MR, NR]", list(op.register_block.get_values()), 2)
    unroll = op.k_unroll.value.data
    if unroll < 1:
        raise ScheduleError(f"{op.name}: k_unroll must be positive, found {unroll}")
    targets = matmul_targets(op, handle)
    for target in targets:
        check_microkernel(op, target, mr, nr)
    for target in targets:
        target.properties["register_block"] = DenseArrayBase.from_list(i64, [mr, nr])
        target.properties["k_unroll"] = IntegerAttr(unroll, i64)
        if op.row_tails is not None:
            target.properties["row_tails"] = UnitAttr()
    return ()


__all__ = ["MicrokernelOp", "registers_needed", "run_microkernel"]
