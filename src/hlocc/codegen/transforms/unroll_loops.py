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
from hlocc.codegen.transforms.expand_float_ops import MATH_APPROXIMATIONS
from hlocc.codegen.transforms.lower_narrow_floats import is_narrow_conversion
from hlocc.codegen.transforms.util import KEEP_ROLLED, clone_block_body, trip_count, walk_ops

MAX_TRIP_COUNT = 64
MAX_UNROLLED_OPS = 4096
EXPANDED_MATH_OPS = 48
"""What one math op the expand-float-ops pass later replaces by an approximation (exp, log, tanh,
erf, sin, pow, ...: 20-60 ops each) counts in the unrolled size: counted as one op, a 37-row
logsumexp unrolled its exp to ~5000 ops after expansion and took 12.7 s to compile."""


def body_size(block) -> int:
    """The ops of `block` as they will be after expand-float-ops and lower-narrow-floats (module
    constant above): a conversion from or to an f8 or f4 format weighs as a math op (one XLA:CPU
    dump of an f8 sum, a 32-wide window whose reducer converts f16 to f8 and back, unrolled to
    ~9000 ops and took 40 s of LLVM)."""
    return sum(EXPANDED_MATH_OPS if op.name in MATH_APPROXIMATIONS or is_narrow_conversion(op) else 1
               for op in block.walk())


def unroll(loop: scf.ForOp) -> bool:
    n = trip_count(loop)
    body = loop.body.block
    if KEEP_ROLLED in loop.attributes or n is None or n > MAX_TRIP_COUNT or n * body_size(body) > MAX_UNROLLED_OPS:
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
        loops = walk_ops(op, scf.ForOp)
        for loop in reversed(loops):  # walk() is pre-order: reversed visits inner loops first
            unroll(loop)
