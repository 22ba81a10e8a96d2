"""`unroll-loops`: fully unroll `scf.for` loops with a small constant trip count (XLA's
optimize_loops.cc unrolls such loops; seed 000 "Loop unrolling": the loop over the elements of a
vector disappears). A loop is unrolled when its trip count is at most `MAX_TRIP_COUNT` and the
unrolled body stays under `MAX_UNROLLED_OPS` ops; innermost loops first.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import scf
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.transforms.util import KEEP_ROLLED, clone_block_body, trip_count

MAX_TRIP_COUNT = 64
MAX_UNROLLED_OPS = 4096


def unroll(loop: scf.ForOp) -> bool:
    n = trip_count(loop)
    body = loop.body.block
    if KEEP_ROLLED in loop.attributes or n is None or n > MAX_TRIP_COUNT \
            or n * sum(1 for _ in body.walk()) > MAX_UNROLLED_OPS:
        return False
    at = InsertPoint.before(loop)
    b = KernelBuilder(at)
    values = list(loop.iter_args)
    for i in range(n):
        values = clone_block_body(body, [b.index(i), *values], at)
    for old, new in zip(loop.results, values):
        old.replace_all_uses_with(new)
    Rewriter.erase_op(loop)
    return True


@dataclass(frozen=True)
class UnrollLoopsPass(ModulePass):
    name = "unroll-loops"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        loops = [o for o in op.walk() if isinstance(o, scf.ForOp)]
        for loop in reversed(loops):  # walk() is pre-order: reversed visits inner loops first
            unroll(loop)
