"""`transform.hlocc.tile`: the block tile MC x NC x KC of an `xla.matmul` (BLIS's loops 5, 4 and
3 around the macro-kernel; issue 17).

    %tiled, %loops:3 = transform.hlocc.tile %mm sizes [MC, NC, KC]
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op, !transform.any_op)

The matmul becomes `scf.for` loops over b (step 1), n (step NC) and m (step MC), in that order
(BLIS's jc outside ic), carrying the output tensor, around one `xla.matmul` per block with
`offsets(b, m0, n0) sizes [1, MC, NC, K]` and `k_block = KC`: the lowering splits the contraction
into KC-sized blocks. A last block past the problem's edge computes only what is inside (the
remainder). With a run-time M (`runtime_m`) the m loop runs to its value. Results: the block's
matmul, then the b, n and m loops. The target handle is consumed.

Illegal: a target that is not an untiled `xla.matmul`, sizes that are not three positive integers.
"""

from __future__ import annotations

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import DenseArrayBase, IndexType, IntegerAttr, i64
from xdsl.dialects.transform import AnyOpType, TransformHandleType
from xdsl.ir import Block, Operation
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, prop_def, result_def
from xdsl.rewriter import InsertPoint, Rewriter

from hlocc.codegen.ir.matmul_ops import MatmulOp
from hlocc.codegen.ir.size_ops import SymbolValueOp
from hlocc.codegen.schedule.handles import ScheduleError, matmul_targets, positive_sizes


@irdl_op_definition
class TileOp(IRDLOperation):
    """Block-tile xla.matmul targets (module doc)."""

    name = "transform.hlocc.tile"

    target = operand_def(TransformHandleType)
    sizes = prop_def(DenseArrayBase.constr(i64))
    tiled = result_def(AnyOpType)
    b_loop = result_def(AnyOpType)
    n_loop = result_def(AnyOpType)
    m_loop = result_def(AnyOpType)

    assembly_format = "$target `sizes` $sizes attr-dict `:` functional-type(operands, results)"

    def __init__(self, target, sizes: list[int]):
        super().__init__(operands=[target], properties={"sizes": DenseArrayBase.from_list(i64, sizes)},
                         result_types=[AnyOpType()] * 4)


def _loop(lo: int, hi: int | Operation, step: int, init, name: str) -> tuple[scf.ForOp, Block, list[Operation]]:
    """The loop and the ops its bounds need (`hi` a constant, or the op computing it)."""
    consts = [arith.ConstantOp(IntegerAttr(v, IndexType())) if isinstance(v, int) else v for v in (lo, hi, step)]
    block = Block(arg_types=[IndexType(), init.type])
    block.args[0].name_hint = name
    loop = scf.ForOp(consts[0].results[0], consts[1].results[0], consts[2].results[0], [init], block)
    return loop, block, consts


def tile_matmul(op: TileOp, target: MatmulOp) -> tuple[MatmulOp, scf.ForOp, scf.ForOp, scf.ForOp]:
    mc, nc, kc = op.sizes.get_values()
    if target.offsets:
        raise ScheduleError(f"{op.name}: the target xla.matmul is already tiled (it has offsets)")
    b_size, m_size, n_size, k_size = target.size_list
    loops = []
    at = InsertPoint.before(target)
    init = target.init
    ivs = {}
    m_extent = SymbolValueOp(target.runtime_m.data) if target.runtime_m is not None else m_size
    for name, size, step in (("b", b_size, 1), ("n0", n_size, nc), ("m0", m_extent, mc)):
        loop, block, consts = _loop(0, size, step, init, name)
        for c in consts:
            Rewriter.insert_op(c, at)
        Rewriter.insert_op(loop, at)
        loops.append(loop)
        ivs[name] = block.args[0]
        init = block.args[1]
        at = InsertPoint.at_end(block)
    schedule = {"k_block": IntegerAttr(kc, i64)} if kc < k_size else {}
    if target.runtime_m is not None:
        schedule["runtime_m"] = target.runtime_m
    inner = MatmulOp(target.lhs, target.rhs, init, target.maps, [1, min(mc, m_size), min(nc, n_size), k_size],
                     target.epilogue.clone(), [ivs["b"], ivs["m0"], ivs["n0"]], schedule)
    Rewriter.insert_op(inner, at)
    value = inner.result
    for loop in reversed(loops):
        Rewriter.insert_op(scf.YieldOp(value), InsertPoint.at_end(loop.body.block))
        value = loop.results[0]
    target.result.replace_all_uses_with(loops[0].results[0])
    Rewriter.erase_op(target)
    return inner, loops[0], loops[1], loops[2]


def run_tile(op: TileOp, handle: object) -> tuple:
    from xdsl.interpreters.transform import OperationHandle  # loaded by the interpreter running `op`

    positive_sizes(op, "sizes [MC, NC, KC]", list(op.sizes.get_values()), 3)
    results = [tile_matmul(op, target) for target in matmul_targets(op, handle)]
    return tuple(OperationHandle(*(r[k] for r in results)) for k in range(4))


__all__ = ["TileOp", "run_tile", "tile_matmul"]
