"""`dce`: dead-code elimination in one backward walk, with xDSL's `dce`'s result.

xDSL's `DeadCodeElimination` (xdsl/transforms/dead_code_elimination.py `region_dce`) computes
liveness to a fixed point: every sweep asks every op for its memory effects (recursively for an op
with regions), and the last sweep only confirms the one before. On the 6800-op probe
(loop__large_loop_slow_compile_time) the pipeline's final `dce` took 85-130 ms per kernel and
removed nothing: the `cse` just before erases the dead ops it meets.

In SSA form with single-block regions a value is used only after (or inside ops after) its
definition, so walking each block from its last op to its first, and each op's regions before
the op's own operands are reached, sees every user of an op before the op itself. An op then is
dead when none of its results has a use left and it would be trivially dead (xDSL's
`would_be_trivially_dead`: no terminator, no symbol, effects on its own results only), which is
xDSL's liveness: live ops are those with effects and, transitively, the producers of their
operands. The effects are asked only of ops without uses, a few per kernel. A region with several
blocks (a CFG, whose back edges this order does not see) is left to xDSL's `region_dce`, run on the
whole module after the walk: the walk erases only ops xDSL finds dead too, so the result is xDSL's
in every case (tests/codegen/transforms/test_dce.py compares the two after every pass of the
pipeline).
"""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Region
from xdsl.passes import ModulePass
from xdsl.transforms.dead_code_elimination import region_dce, would_be_trivially_dead


def _erase_dead(region: Region) -> bool:
    """Erase the dead ops of `region` and its single-block regions; whether some region in it has
    several blocks (left as it is)."""
    if len(region.blocks) > 1:
        return True
    several = False
    for block in region.blocks:
        op = block.last_op
        while op is not None:
            previous = op.prev_op
            if not any(result.first_use is not None for result in op.results) and would_be_trivially_dead(op):
                block.erase_op(op)
            else:
                for nested in op.regions:
                    several |= _erase_dead(nested)
            op = previous
    return several


class DeadCodeEliminationPass(ModulePass):
    """xDSL's `dce` in one backward walk (module doc)."""

    name = "dce"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if _erase_dead(op.body):
            region_dce(op.body)
