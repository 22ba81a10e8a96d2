"""`transform.hlocc.parallelize`: a tiled matmul's block loops (b, n, m, made by
`transform.hlocc.tile`) become the kernel's blocks, which the CPU runtime spreads over its thread
pool (the GPU grid on a GPU; issue 17).

    transform.hlocc.parallelize %tiled : !transform.any_op

The block id (`gpu.block_id x`, which the emitter put in the entry function with the launch's
range) is split into (b, n-block, m-block), m fastest, and gives the block matmul's offsets; the
three loops disappear and each block writes its own part of the output. The emitter chose the
launch from the same schedule (B x ceil(N/NC) x ceil(M/MC) blocks); the op checks that the block
id's range covers exactly the loops' iterations.

Illegal: a target not directly inside the three loops `tile` made; an entry function without a
block id, or whose block count differs from the loops' trip counts.
"""

from __future__ import annotations

from xdsl.dialects import arith, gpu, scf
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr
from xdsl.dialects.transform import TransformHandleType
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def
from xdsl.rewriter import InsertPoint, Rewriter

from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.ir.matmul_ops import MatmulOp
from hlocc.codegen.schedule.handles import ScheduleError, matmul_targets


@irdl_op_definition
class ParallelizeOp(IRDLOperation):
    """Map a tiled matmul's block loops to the kernel's blocks (module doc)."""

    name = "transform.hlocc.parallelize"

    target = operand_def(TransformHandleType)

    assembly_format = "$target attr-dict `:` type($target)"


def _constant(value: SSAValue) -> int | None:
    owner = value.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data
    return None


def _trip_count(op: ParallelizeOp, loop: scf.ForOp) -> int:
    lb, ub, step = (_constant(v) for v in (loop.lb, loop.ub, loop.step))
    if lb is None or ub is None or step is None or step < 1:
        raise ScheduleError(f"{op.name}: the block loops must have constant bounds")
    return max(0, -(-(ub - lb) // step))


def _block_loops(op: ParallelizeOp, target: MatmulOp) -> list[scf.ForOp]:
    """The b, n and m loops around `target`, outermost first, as `tile` made them."""
    loops: list[scf.ForOp] = []
    node: Operation = target
    for _ in range(3):
        parent = node.parent_op()
        if not isinstance(parent, scf.ForOp) or not _only_constants_and(parent, node):
            raise ScheduleError(f"{op.name}: the target is not directly inside the block loops of transform.hlocc.tile")
        loops.insert(0, parent)
        node = parent
    ivs = [loop.body.block.args[0] for loop in loops]  # b, n0, m0
    if list(target.offsets) != [ivs[0], ivs[2], ivs[1]]:
        raise ScheduleError(f"{op.name}: the target's offsets are not the block loops' induction variables")
    return loops


def _only_constants_and(loop: scf.ForOp, inner: Operation) -> bool:
    """The loop body holds `inner`, its yield and the constants of loops nested in it."""
    return all(o is inner or isinstance(o, (arith.ConstantOp, scf.YieldOp)) for o in loop.body.block.ops)


def _block_id(op: ParallelizeOp, target: MatmulOp) -> tuple[gpu.BlockIdOp, int]:
    func = target.parent_op()
    while func is not None and func.name != "func.func":
        func = func.parent_op()
    found = [o for o in func.walk() if isinstance(o, gpu.BlockIdOp)] if func is not None else []
    if len(found) != 1:
        raise ScheduleError(f"{op.name}: the kernel has no block id to map the block loops to (the emitter "
                            "gives one when the schedule parallelizes)")
    bounds = found[0].attributes.get("xla.range")
    if not isinstance(bounds, ArrayAttr):
        raise ScheduleError(f"{op.name}: the block id has no xla.range")
    return found[0], bounds.data[1].value.data + 1


def parallelize_matmul(op: ParallelizeOp, target: MatmulOp) -> MatmulOp:
    loops = _block_loops(op, target)
    b_trips, n_trips, m_trips = (_trip_count(op, loop) for loop in loops)
    block_id, blocks = _block_id(op, target)
    if blocks != b_trips * n_trips * m_trips:
        raise ScheduleError(f"{op.name}: the launch has {blocks} blocks but the block loops run "
                            f"{b_trips} x {n_trips} x {m_trips} = {b_trips * n_trips * m_trips} iterations")
    outer = loops[0]
    b = KernelBuilder(InsertPoint.before(outer))
    bid = block_id.result
    steps = [_constant(loop.step) for loop in loops]
    m_block = b.add(arith.RemUIOp(bid, b.index(m_trips)))
    rest = b.add(arith.DivUIOp(bid, b.index(m_trips)))
    n_block = b.add(arith.RemUIOp(rest, b.index(n_trips)))
    b_index = b.add(arith.DivUIOp(rest, b.index(n_trips)))
    n0 = b.add(arith.MuliOp(n_block, b.index(steps[1])))
    m0 = b.add(arith.MuliOp(m_block, b.index(steps[2])))
    for value, name in ((b_index, "b"), (n0, "n0"), (m0, "m0")):
        value.name_hint = name
    target.detach()
    b.insert(target)
    target.operands = [target.lhs, target.rhs, outer.iter_args[0], b_index, m0, n0]
    outer.results[0].replace_all_uses_with(target.result)
    Rewriter.erase_op(outer)
    return target


def run_parallelize(op: ParallelizeOp, handle: object) -> tuple:
    for target in matmul_targets(op, handle):
        parallelize_matmul(op, target)
    return ()


__all__ = ["ParallelizeOp", "run_parallelize"]
