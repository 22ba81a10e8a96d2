"""`lower-matmul`: `xla.matmul` → loops on tensors (the naive, exact lowering; issue 17 step 1).

    scf.for b, m, n over the op's extents (from its offsets when tiled; an index past the problem
    is skipped: a remainder block)
      acc = 0; scf.for k over [0, K): acc += ext(lhs[lhs_map(b, m, n, k)]) * ext(rhs[rhs_map(...)])
      out = tensor.insert epilogue(acc, b, m, n) into out[out_map(b, m, n, 0)]

Products and sums are separate `arith.mulf`/`arith.addf` in the accumulator type (f32 for f32,
bf16 and f16 operands, f64 for f64: the evaluator's and XLA:CPU's dot arithmetic), k in increasing
order. With `k_block` = KC the k loop is split into blocks of KC (a loop over blocks around a loop
within one), the structure the schedule asks for; the sum's order is unchanged. Everything after
this pass is the ordinary kernel pipeline: the tensor accesses are flattened, bf16 is expanded by
`lower-narrow-floats`, and the loops reach LLVM as they are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, scf, tensor
from xdsl.dialects.builtin import IndexType, ModuleOp
from xdsl.ir import Block, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from hlocc.analysis.indexing_map import IndexingMap
from hlocc.codegen.ir import ApplyIndexingOp
from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.ir.matmul_ops import MatmulOp
from hlocc.codegen.transforms.util import clone_block_body

LoopBody = Callable[[KernelBuilder, SSAValue, list[SSAValue]], list[SSAValue]]


def for_loop(b: KernelBuilder, lo: SSAValue | int, hi: SSAValue | int, inits: list[SSAValue], body: LoopBody,
             name: str = "", step: int = 1) -> list[SSAValue]:
    """`scf.for iv = lo to hi step step iter_args(inits)`, its body built by `body(builder, iv, args)`."""
    types = [v.type for v in inits]
    block = Block(arg_types=[IndexType(), *types])
    if name:
        block.args[0].name_hint = name
    inner = KernelBuilder(block)
    inner.insert(scf.YieldOp(*body(inner, block.args[0], list(block.args[1:]))))
    lo = b.index(lo) if isinstance(lo, int) else lo
    hi = b.index(hi) if isinstance(hi, int) else hi
    return list(b.insert(scf.ForOp(lo, hi, b.index(step), inits, block)).results)


def if_then(b: KernelBuilder, cond: SSAValue | None, then: Callable[[KernelBuilder], list[SSAValue]],
            otherwise: list[SSAValue]) -> list[SSAValue]:
    """`scf.if cond { then() } else { otherwise }` (just `then()` when there is no condition)."""
    if cond is None:
        return then(b)
    then_block, else_block = Block(), Block()
    then_b = KernelBuilder(then_block)
    then_b.insert(scf.YieldOp(*then(then_b)))
    KernelBuilder(else_block).insert(scf.YieldOp(*otherwise))
    return list(b.insert(scf.IfOp(cond, [v.type for v in otherwise], Region(then_block), Region(else_block))).results)


def load_operand(b: KernelBuilder, t: SSAValue, m: IndexingMap, point: list[SSAValue], acc_type) -> SSAValue:
    """The operand element at `m(point)`, converted to the accumulator type."""
    indices = list(b.insert(ApplyIndexingOp(m, point)).results)
    value = b.add(tensor.ExtractOp(t, indices, t.type.element_type))
    return b.add(arith.ExtFOp(value, acc_type)) if value.type != acc_type else value


def accumulate(b: KernelBuilder, op: MatmulOp, acc: SSAValue, bmn: list[SSAValue], k: SSAValue) -> SSAValue:
    """acc + lhs * rhs at (b, m, n, k)."""
    lhs_map, rhs_map, _ = op.maps
    point = [*bmn, k]
    x = load_operand(b, op.lhs, lhs_map, point, op.acc_type)
    y = load_operand(b, op.rhs, rhs_map, point, op.acc_type)
    return b.add(arith.AddfOp(acc, b.add(arith.MulfOp(x, y))))


def contraction(b: KernelBuilder, op: MatmulOp, bmn: list[SSAValue]) -> SSAValue:
    """The sum over k at (b, m, n), k in increasing order (split into KC blocks when `k_block`)."""
    k_total = op.size_list[3]  # never tiled: the whole contraction (the maps cannot say K = 0)
    acc = b.constant(0.0, op.acc_type)
    kc = op.k_block.value.data if op.k_block is not None else k_total
    if k_total == 0:
        return acc
    if kc >= k_total:
        return for_loop(b, 0, k_total, [acc], lambda ib, k, a: [accumulate(ib, op, a[0], bmn, k)], "k")[0]

    def block(ib: KernelBuilder, k0: SSAValue, a: list[SSAValue]) -> list[SSAValue]:
        end = ib.add(arith.MinUIOp(ib.add(arith.AddiOp(k0, ib.index(kc))), ib.index(k_total)))
        return for_loop(ib, k0, end, a, lambda jb, k, a2: [accumulate(jb, op, a2[0], bmn, k)], "k")

    return for_loop(b, 0, k_total, [acc], block, "kc", step=kc)[0]


def lower_matmul(op: MatmulOp) -> None:
    sizes, problem = op.size_list, op.problem_sizes
    b = KernelBuilder(InsertPoint.before(op))
    offsets = list(op.offsets)
    partial = [bool(offsets) and problem[d] % max(sizes[d], 1) != 0 for d in range(3)]
    _, _, out_map = op.maps

    def element(eb: KernelBuilder, bmn: list[SSAValue], out: SSAValue) -> list[SSAValue]:
        def compute(cb: KernelBuilder) -> list[SSAValue]:
            acc = contraction(cb, op, bmn)
            value = clone_block_body(op.epilogue.block, [acc, *bmn], cb.insertion_point)[0]
            indices = list(cb.insert(ApplyIndexingOp(out_map, [*bmn, cb.index(0)])).results)
            return [cb.add(tensor.InsertOp(value, out, indices))]
        checks = [eb.cmpi("slt", v, eb.index(problem[d])) for d, v in enumerate(bmn) if partial[d]]
        return if_then(eb, eb.and_(checks), compute, [out])

    def nest(nb: KernelBuilder, level: int, bmn: list[SSAValue], out: SSAValue) -> list[SSAValue]:
        if level == 3:
            return element(nb, bmn, out)

        def body(ib: KernelBuilder, iv: SSAValue, args: list[SSAValue]) -> list[SSAValue]:
            index = ib.add(arith.AddiOp(offsets[level], iv)) if offsets else iv
            return nest(ib, level + 1, [*bmn, index], args[0])
        return for_loop(nb, 0, sizes[level], [out], body, "bmn"[level])

    result = nest(b, 0, [], op.init)[0]
    op.result.replace_all_uses_with(result)
    Rewriter.erase_op(op)


@dataclass(frozen=True)
class LowerMatmulPass(ModulePass):
    name = "lower-matmul"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for matmul in [o for o in op.walk() if isinstance(o, MatmulOp)]:
            lower_matmul(matmul)


__all__ = ["LowerMatmulPass", "for_loop", "if_then", "lower_matmul"]
