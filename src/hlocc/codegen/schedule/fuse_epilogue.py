"""`transform.hlocc.fuse_epilogue`: apply the matmul's epilogue (the dot's rounding, bias,
activation, convert: the fusion root) to each register block's tile right after its last K block,
while the tile is in L1, instead of in a pass over the whole accumulator block afterwards (issue
17; BLIS's micro-kernel epilogue, MLIR's fuse_into_containing_op in spirit).

    transform.hlocc.fuse_epilogue %tiled : !transform.any_op

Sets `fuse_epilogue` on packed targets. The last K block is peeled (transforms/matmul/packed.py), so
the fused epilogue costs no branch in the K loop. Results are the same either way: the epilogue
reads the same f32 sum.

Illegal: an unpacked target (an unpacked register block already applies the epilogue to its
accumulators before the store).
"""

from __future__ import annotations

from xdsl.dialects.transform import TransformHandleType
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def

from hlocc.codegen.schedule.handles import mark_packed


@irdl_op_definition
class FuseEpilogueOp(IRDLOperation):
    """Apply the epilogue per register tile after the last K block (module doc)."""

    name = "transform.hlocc.fuse_epilogue"

    target = operand_def(TransformHandleType)

    assembly_format = "$target attr-dict `:` type($target)"


def run_fuse_epilogue(op: FuseEpilogueOp, handle: object) -> tuple:
    return mark_packed(op, handle, "fuse_epilogue")


__all__ = ["FuseEpilogueOp", "run_fuse_epilogue"]
