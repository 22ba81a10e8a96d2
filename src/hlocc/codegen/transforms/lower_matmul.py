"""`lower-matmul`: `xla.matmul` → loops on tensors (the naive, exact lowering; issue 17 step 1).

    scf.for b, m, n over the op's extents (from its offsets when tiled; an index past the problem
    is skipped: a remainder block)
      acc = 0; scf.for k over [0, K): acc += ext(lhs[lhs_map(b, m, n, k)]) * ext(rhs[rhs_map(...)])
      out = tensor.insert epilogue(acc, b, m, n) into out[out_map(b, m, n, 0)]

Products and sums are separate `arith.mulf`/`arith.addf` in the accumulator type (f32 for f32,
bf16 and f16 operands, f64 for f64: the evaluator's and XLA:CPU's dot arithmetic), k in increasing
order. The loops over elements (and over K blocks) are marked to stay rolled (`unroll-loops` leaves
them; a k loop of up to 64 steps still unrolls): a 8x32x96 product had its n and m loops unrolled
around 256 k loops, which took 17 s to compile into a kernel no faster (LLVM vectorizes the rolled n
loop), and an unrolled 16-step k loop in each of 24 unrolled n steps 4.5 s for a 2x faster one.
With `k_block` = KC the k loop is split into blocks of KC (a loop over blocks around a loop within
one), the structure the schedule asks for; the sum's order is unchanged. A run-time M
(`runtime_m`): rows up to the maps' bound are visited and those at or past M's value skipped
(the packed form runs only the rows below it). Everything after
this pass is the ordinary kernel pipeline: the tensor accesses are flattened, bf16 is expanded by
`lower-narrow-floats`, and the loops reach LLVM as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, math, tensor
from xdsl.dialects.builtin import ModuleOp, UnitAttr
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from hlocc.analysis.indexing_map import IndexingMap
from hlocc.codegen.ir import ApplyIndexingOp
from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.ir.matmul_ops import MatmulOp
from hlocc.codegen.transforms.matmul.gpu_mma_pipeline import lower_gpu_matmul
from hlocc.codegen.transforms.matmul.packed import PackedLowering
from hlocc.codegen.transforms.unroll_loops import KEEP_ROLLED
from hlocc.codegen.transforms.util import clone_block_body, for_loop, if_then, walk_ops


def rolled_loop(*args, **kwargs) -> list[SSAValue]:
    """`for_loop` marked to stay rolled (module doc): its body is unrolled already where that pays
    (a register block's k steps) or not worth its compile time."""
    results = for_loop(*args, **kwargs)
    results[0].owner.attributes[KEEP_ROLLED] = UnitAttr()
    return results


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
        return rolled_loop(ib, k0, end, a, lambda jb, k, a2: [accumulate(jb, op, a2[0], bmn, k)], "k")

    return rolled_loop(b, 0, k_total, [acc], block, "kc", step=kc)[0]


def _clamped(b: KernelBuilder, index: SSAValue, bound: int | SSAValue, clamp: bool) -> SSAValue:
    """`index`, or min(index, bound - 1) where a sub-block may reach past the problem's edge (its
    operand reads stay in bounds; what such a row or column computes is not stored)."""
    if not clamp:
        return index
    last = b.index(bound - 1) if isinstance(bound, int) else b.add(arith.SubiOp(bound, b.index(1)))
    return b.add(arith.MinUIOp(index, last))


def _bound(b: KernelBuilder, value: int | SSAValue) -> SSAValue:
    return b.index(value) if isinstance(value, int) else value


def register_block_step(b: KernelBuilder, op: MatmulOp, accs: list[SSAValue], bi: SSAValue, rows: list[SSAValue],
                        cols: list[SSAValue], k: SSAValue) -> list[SSAValue]:
    """One k step of an MR x NR register block: MR lhs and NR rhs elements, MR x NR fused
    multiply-adds (one rounding per step, as BLAS micro-kernels do; the naive form rounds the
    product and the sum: both are exact on integer-valued inputs)."""
    lhs_map, rhs_map, _ = op.maps
    zero = b.index(0)
    a = [load_operand(b, op.lhs, lhs_map, [bi, r, zero, k], op.acc_type) for r in rows]
    w = [load_operand(b, op.rhs, rhs_map, [bi, zero, c, k], op.acc_type) for c in cols]
    nr = len(cols)
    return [b.add(math.FmaOp(a[i // nr], w[i % nr], acc)) for i, acc in enumerate(accs)]


def register_block_sums(b: KernelBuilder, op: MatmulOp, bi: SSAValue, rows: list[SSAValue],
                        cols: list[SSAValue]) -> list[SSAValue]:
    """The MR x NR sums of a register block, row-major, k in increasing order: a loop of
    `k_unroll` unrolled steps, then the remaining steps one by one."""
    k_total = op.size_list[3]
    accs = [b.constant(0.0, op.acc_type)] * (len(rows) * len(cols))
    unroll = op.k_unroll.value.data if op.k_unroll is not None else 1
    main = k_total - k_total % unroll

    def unrolled(ib: KernelBuilder, k0: SSAValue, a: list[SSAValue]) -> list[SSAValue]:
        for u in range(unroll):
            k = ib.add(arith.AddiOp(k0, ib.index(u))) if u else k0
            a = register_block_step(ib, op, a, bi, rows, cols, k)
        return a

    if main:
        accs = rolled_loop(b, 0, main, accs, unrolled, "k", step=unroll)
    if main < k_total:
        accs = rolled_loop(b, main, k_total, accs, lambda ib, k, a: register_block_step(ib, op, a, bi, rows, cols, k),
                        "k")
    return accs


def lower_register_blocked(op: MatmulOp) -> None:
    """The register-blocked form (`register_block` set by transform.hlocc.microkernel): the op's
    extent in MR x NR sub-blocks (BLIS's loops 2 and 1), each summed in MR x NR accumulators
    over the whole contraction, then the epilogue and the store of each element inside the problem."""
    mr, nr = op.register_block.get_values()
    sizes, problem = op.size_list, op.problem_sizes
    offsets = list(op.offsets) or [None, None, None]
    b = KernelBuilder(InsertPoint.before(op))
    _, _, out_map = op.maps
    # A sub-block can reach past the problem's edge when MR or NR does not divide the problem or
    # the block, or when the last block of a tiled op reaches past the problem (always, with a
    # run-time M: rows up to its bound are visited and those past its value skipped).
    m_total = op.m_value(b)
    clip_m = problem[1] % mr != 0 or sizes[1] % mr != 0 or (offsets[1] is not None and problem[1] % sizes[1] != 0) \
        or not isinstance(m_total, int)
    clip_n = problem[2] % nr != 0 or sizes[2] % nr != 0 or (offsets[2] is not None and problem[2] % sizes[2] != 0)

    def global_index(ib: KernelBuilder, level: int, iv: SSAValue) -> SSAValue:
        return ib.add(arith.AddiOp(offsets[level], iv)) if offsets[level] is not None else iv

    def block(ib: KernelBuilder, bi: SSAValue, m0: SSAValue, n0: SSAValue, out: SSAValue) -> SSAValue:
        rows = [ib.add(arith.AddiOp(m0, ib.index(i))) if i else m0 for i in range(mr)]
        cols = [ib.add(arith.AddiOp(n0, ib.index(j))) if j else n0 for j in range(nr)]
        accs = register_block_sums(ib, op, bi, [_clamped(ib, r, m_total, clip_m) for r in rows],
                                   [_clamped(ib, c, problem[2], clip_n) for c in cols])
        for i, row in enumerate(rows):
            for j, col in enumerate(cols):
                def store(sb: KernelBuilder, acc=accs[i * nr + j], row=row, col=col, out=out) -> list[SSAValue]:
                    value = clone_block_body(op.epilogue.block, [acc, bi, row, col], sb.insertion_point)[0]
                    indices = list(sb.insert(ApplyIndexingOp(out_map, [bi, row, col, sb.index(0)])).results)
                    return [sb.add(tensor.InsertOp(value, out, indices))]
                checks = ([ib.cmpi("slt", row, _bound(ib, m_total))] if clip_m else []) + \
                         ([ib.cmpi("slt", col, ib.index(problem[2]))] if clip_n else [])
                out = if_then(ib, ib.and_(checks), store, [out])[0]
        return out

    def b_body(ib: KernelBuilder, iv: SSAValue, args: list[SSAValue]) -> list[SSAValue]:
        bi = global_index(ib, 0, iv)

        def m_body(jb: KernelBuilder, mv: SSAValue, margs: list[SSAValue]) -> list[SSAValue]:
            m0 = global_index(jb, 1, mv)

            def n_body(kb: KernelBuilder, nv: SSAValue, nargs: list[SSAValue]) -> list[SSAValue]:
                return [block(kb, bi, m0, global_index(kb, 2, nv), nargs[0])]
            return rolled_loop(jb, 0, sizes[2], margs, n_body, "jr", step=nr)
        return rolled_loop(ib, 0, sizes[1], args, m_body, "ir", step=mr)

    result = rolled_loop(b, 0, sizes[0], [op.init], b_body, "b")[0]
    op.result.replace_all_uses_with(result)
    Rewriter.erase_op(op)


def lower_matmul(op: MatmulOp) -> None:
    if op.warp_grid is not None:  # the GPU schedule (transform.hlocc.set_operand_layout)
        lower_gpu_matmul(op)
        return
    if op.packed is not None and op.size_list[3] > 0:  # K = 0: the naive form's zeros
        PackedLowering(op).lower()
        return
    if op.register_block is not None and op.size_list[3] > 0:
        lower_register_blocked(op)
        return
    sizes, problem = op.size_list, op.problem_sizes
    b = KernelBuilder(InsertPoint.before(op))
    offsets = list(op.offsets)
    partial = [bool(offsets) and problem[d] % max(sizes[d], 1) != 0 for d in range(3)]
    bounds: list[int | SSAValue] = list(problem[:3])
    if op.runtime_m is not None:  # rows up to the bound visited, those past the run-time M skipped
        bounds[1], partial[1] = op.m_value(b), True
    _, _, out_map = op.maps

    def element(eb: KernelBuilder, bmn: list[SSAValue], out: SSAValue) -> list[SSAValue]:
        def compute(cb: KernelBuilder) -> list[SSAValue]:
            acc = contraction(cb, op, bmn)
            value = clone_block_body(op.epilogue.block, [acc, *bmn], cb.insertion_point)[0]
            indices = list(cb.insert(ApplyIndexingOp(out_map, [*bmn, cb.index(0)])).results)
            return [cb.add(tensor.InsertOp(value, out, indices))]
        checks = [eb.cmpi("slt", v, _bound(eb, bounds[d])) for d, v in enumerate(bmn) if partial[d]]
        return if_then(eb, eb.and_(checks), compute, [out])

    def nest(nb: KernelBuilder, level: int, bmn: list[SSAValue], out: SSAValue) -> list[SSAValue]:
        if level == 3:
            return element(nb, bmn, out)

        def body(ib: KernelBuilder, iv: SSAValue, args: list[SSAValue]) -> list[SSAValue]:
            index = ib.add(arith.AddiOp(offsets[level], iv)) if offsets else iv
            return nest(ib, level + 1, [*bmn, index], args[0])
        return rolled_loop(nb, 0, sizes[level], [out], body, "bmn"[level])

    result = nest(b, 0, [], op.init)[0]
    op.result.replace_all_uses_with(result)
    Rewriter.erase_op(op)


@dataclass(frozen=True)
class LowerMatmulPass(ModulePass):
    name = "lower-matmul"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for matmul in walk_ops(op, MatmulOp):
            lower_matmul(matmul)


__all__ = ["LowerMatmulPass", "for_loop", "if_then", "lower_matmul"]
