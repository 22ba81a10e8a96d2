"""The packed form of `lower-matmul`: BLIS's macro-kernel over packed, zero-padded panels with an
explicit vector register block (issue 17 step 3; Low et al. 2016, Goto & van de Geijn 2008).

A block matmul that `transform.hlocc.pack` marked (`packed`, after `tile` and `microkernel`)
computes its MC x NC block of the output as

    Cacc, Bp, Ap = per-block scratch (xla.allocate_shared: a stack buffer of the block function)
    for each K block [k0, k0 + kc) (the first and the last peeled, so each has a constant kc):
      pack B: Bp[jr/NR][k][0:NR] = rhs(b, n0+jr+l, k0+k), columns past N zero     (loop 4's panel)
      pack A: Ap[ir/MR][k][0:MR] = lhs(b, m0+ir+r, k0+k), rows past M zero        (loop 3's block)
      for ir in [0, rows) step MR:                                                 (loop 2)
        for jr in [0, cols) step NR:                                               (loop 1)
          MR x NR/16 vector<16xf32> accumulators = 0 (first K block) or Cacc's tile
          for k in [0, kc): NR/16 vectors of Bp, MR broadcasts of Ap, MR x NR/16 math.fma
          Cacc's tile = the accumulators                     (full vectors: Cacc is padded)
          [fuse_epilogue, last K block: the epilogue of the tile's elements inside the problem]
    [otherwise: the epilogue of every element of the block inside the problem, from Cacc]

The A micro-panel (MR x KC) stays in L1 across a row of register blocks; the B micro-panels
stream from the packed B panel in L2 (NR = 64 is 256 bytes a step, a fifth of L2's bandwidth).
So edges need no masks: the panels are zero-padded to whole register blocks and only the
epilogue, a loop with run-time bounds, looks at the problem's edge (BLIS handles edges the same
way, through a temporary tile). Without `A` in `packed` the micro-kernel broadcasts lhs
elements straight from the operand through its map (rows past M clamped to the last row: what
they compute is never stored). `hoist_address`: the micro-kernel's panel offsets are loop-carried
and advanced by MR and NR each step instead of recomputed from k. `prefetch` = d: each step also
prefetches the B panel d steps ahead (`xla.prefetch`, LLVM's prefetch intrinsic).

Numerics: every (b, m, n) sums its products in k order, one fused multiply-add per step, in f32:
exact on integer-valued inputs, the order of BLAS micro-kernels otherwise. The epilogue rounds the
sum to the dot's type as the naive form does.
"""

from __future__ import annotations

from xdsl.dialects import arith, func, math, tensor, vector
from xdsl.dialects.builtin import AffineMapAttr, ArrayAttr, BoolAttr, IntegerType, TensorType, VectorType, f32
from xdsl.ir import SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.rewriter import InsertPoint, Rewriter

from hlocc.codegen.ir import AllocateSharedOp, ApplyIndexingOp
from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.ir.matmul_ops import MatmulOp, PrefetchOp
from hlocc.codegen.transforms.util import clone_block_body, for_loop

LANES = 16
"""f32 lanes of one vector register (AVX-512's zmm); NR is a multiple of it."""


def _vtype() -> VectorType:
    return VectorType(f32, [LANES])


def _read(b: KernelBuilder, t: SSAValue, offset: SSAValue) -> SSAValue:
    return b.add(vector.TransferReadOp(t, [offset], b.constant(0.0, f32), _vtype(),
                                       ArrayAttr([BoolAttr(True, IntegerType(1))]),
                                       AffineMapAttr(AffineMap.identity(1))))


def _write(b: KernelBuilder, v: SSAValue, t: SSAValue, offset: SSAValue) -> SSAValue:
    return b.add(vector.TransferWriteOp(v, t, [offset], ArrayAttr([BoolAttr(True, IntegerType(1))]),
                                        permutation_map=AffineMapAttr(AffineMap.identity(1)), result_type=t.type))


def _add(b: KernelBuilder, x: SSAValue, y: SSAValue | int) -> SSAValue:
    y = b.index(y) if isinstance(y, int) else y
    return b.add(arith.AddiOp(x, y))


def _mul(b: KernelBuilder, x: SSAValue, y: int) -> SSAValue:
    return b.add(arith.MuliOp(x, b.index(y)))


def _min(b: KernelBuilder, x: SSAValue, y: SSAValue | int) -> SSAValue:
    y = b.index(y) if isinstance(y, int) else y
    return b.add(arith.MinSIOp(x, y))


def _sub(b: KernelBuilder, x: SSAValue | int, y: SSAValue) -> SSAValue:
    x = b.index(x) if isinstance(x, int) else x
    return b.add(arith.SubiOp(x, y))


class PackedLowering:
    """Builds the packed form of one block matmul (module doc)."""

    def __init__(self, op: MatmulOp):
        self.for_loop = for_loop
        self.op = op
        self.mr, self.nr = op.register_block.get_values()
        _, mc, nc, self.k_total = op.size_list
        _, self.m_total, self.n_total, _ = op.problem_sizes
        self.kc = min(op.k_block.value.data if op.k_block is not None else self.k_total, self.k_total)
        self.mcp = -(-mc // self.mr) * self.mr
        self.ncp = -(-nc // self.nr) * self.nr
        self.mc, self.nc = mc, nc
        packed = list(op.packed.get_values())
        self.pack_a = 0 in packed
        self.unroll = op.k_unroll.value.data if op.k_unroll is not None else 1
        self.hoist = op.hoist_address is not None
        self.fuse = op.fuse_epilogue is not None
        self.prefetch = op.prefetch.value.data if op.prefetch is not None else 0

    # -- scratch ----------------------------------------------------------------------------------
    def scratch(self) -> dict[str, SSAValue]:
        """The block's buffers, allocated at the top of the kernel's entry function."""
        fn = self.op.parent_op()
        while not isinstance(fn, func.FuncOp):
            fn = fn.parent_op()
        b = KernelBuilder(InsertPoint.at_start(fn.body.block))
        sizes = {"bp": self.kc * self.ncp, "cacc": self.mcp * self.ncp}
        if self.pack_a:
            sizes["ap"] = self.mcp * self.kc
        return {name: b.add(AllocateSharedOp(TensorType(f32, [n]))) for name, n in sizes.items()}

    # -- the whole block ----------------------------------------------------------------------------
    def lower(self) -> None:
        op = self.op
        b = KernelBuilder(InsertPoint.before(op))
        self.bi, self.m0, self.n0 = op.offsets
        self.rows = _min(b, _sub(b, self.m_total, self.m0), self.mc)
        self.cols = _min(b, _sub(b, self.n_total, self.n0), self.nc)
        state = {**self.scratch(), "out": op.init}
        last = ((self.k_total - 1) // self.kc) * self.kc
        if last > 0:
            state = self.k_block(b, state, b.index(0), self.kc, first=True, final=False)
        if last > self.kc:
            names = list(state)

            def middle(ib: KernelBuilder, k0: SSAValue, args: list[SSAValue]) -> list[SSAValue]:
                s = self.k_block(ib, dict(zip(names, args)), k0, self.kc, first=False, final=False)
                return [s[n] for n in names]
            state = dict(zip(names, self.for_loop(b, self.kc, last, [state[n] for n in names], middle, "kc",
                                                  step=self.kc)))
        state = self.k_block(b, state, b.index(last), self.k_total - last, first=last == 0, final=True)
        out = state["out"] if self.fuse else self.epilogue(b, state["cacc"], state["out"], b.index(0), self.rows,
                                                           b.index(0), self.cols)
        op.result.replace_all_uses_with(out)
        Rewriter.erase_op(op)

    def k_block(self, b: KernelBuilder, state: dict[str, SSAValue], k0: SSAValue, kc: int, first: bool,
                final: bool) -> dict[str, SSAValue]:
        state = dict(state)
        state["bp"] = self.pack_b(b, state["bp"], k0, kc)
        if self.pack_a:
            state["ap"] = self.pack_a_block(b, state["ap"], k0, kc)
        names = ["cacc", "out"]

        def ir_body(ib: KernelBuilder, ir: SSAValue, args: list[SSAValue]) -> list[SSAValue]:
            def jr_body(jb: KernelBuilder, jr: SSAValue, jargs: list[SSAValue]) -> list[SSAValue]:
                cacc, out = jargs
                cacc = self.tile(jb, state, cacc, ir, jr, k0, kc, first)
                if final and self.fuse:
                    out = self.epilogue(jb, cacc, out, ir, _min(jb, _add(jb, ir, self.mr), self.rows), jr,
                                        _min(jb, _add(jb, jr, self.nr), self.cols))
                return [cacc, out]
            return self.for_loop(ib, 0, self.cols, args, jr_body, "jr", step=self.nr)

        cacc, out = self.for_loop(b, 0, self.rows, [state[n] for n in names], ir_body, "ir", step=self.mr)
        state["cacc"], state["out"] = cacc, out
        return state

    # -- packing ----------------------------------------------------------------------------------
    def pack_b(self, b: KernelBuilder, bp: SSAValue, k0: SSAValue, kc: int) -> SSAValue:
        """Bp[jr * KC + k * NR + l] = rhs(b, n0 + jr + l, k0 + k); zero past the block's columns."""
        op, nr = self.op, self.nr
        rhs_map = op.maps[1]

        def panel(pb: KernelBuilder, jr: SSAValue, args: list[SSAValue]) -> list[SSAValue]:
            count = _min(pb, _sub(pb, self.cols, jr), nr)
            n_base = _add(pb, self.n0, jr)
            base = _mul(pb, jr, self.kc)

            def row(rb: KernelBuilder, k: SSAValue, rargs: list[SSAValue]) -> list[SSAValue]:
                kk = _add(rb, k0, k)
                at = _add(rb, base, _mul(rb, k, nr))

                def copy(cb: KernelBuilder, lane: SSAValue, cargs: list[SSAValue]) -> list[SSAValue]:
                    n = _add(cb, n_base, lane)
                    idx = list(cb.insert(ApplyIndexingOp(rhs_map, [self.bi, cb.index(0), n, kk])).results)
                    value = cb.add(tensor.ExtractOp(op.rhs, idx, op.rhs.type.element_type))
                    if value.type != f32:
                        value = cb.add(arith.ExtFOp(value, f32))
                    return [cb.add(tensor.InsertOp(value, cargs[0], [_add(cb, at, lane)]))]

                def zero(cb: KernelBuilder, lane: SSAValue, cargs: list[SSAValue]) -> list[SSAValue]:
                    return [cb.add(tensor.InsertOp(cb.constant(0.0, f32), cargs[0], [_add(cb, at, lane)]))]

                t = self.for_loop(rb, 0, count, rargs, copy, "l")
                return self.for_loop(rb, count, nr, t, zero, "l")
            return self.for_loop(pb, 0, kc, args, row, "k")
        return self.for_loop(b, 0, self.cols, [bp], panel, "jp", step=nr)[0]

    def pack_a_block(self, b: KernelBuilder, ap: SSAValue, k0: SSAValue, kc: int) -> SSAValue:
        """Ap[ir * KC + k * MR + r] = lhs(b, m0 + ir + r, k0 + k); zero past the problem's rows."""
        mr = self.mr

        def panel(pb: KernelBuilder, ir: SSAValue, args: list[SSAValue]) -> list[SSAValue]:
            rows = [_add(pb, _add(pb, self.m0, ir), r) for r in range(mr)]
            inside = [pb.cmpi("slt", m, pb.index(self.m_total)) for m in rows]
            clamped = [_min(pb, m, self.m_total - 1) for m in rows]
            base = _mul(pb, ir, self.kc)

            def step(kb: KernelBuilder, k: SSAValue, kargs: list[SSAValue]) -> list[SSAValue]:
                kk = _add(kb, k0, k)
                at = _add(kb, base, _mul(kb, k, mr))
                t = kargs[0]
                for r in range(mr):
                    value = kb.select(inside[r], self.lhs_element(kb, clamped[r], kk), kb.constant(0.0, f32))
                    t = kb.add(tensor.InsertOp(value, t, [_add(kb, at, r)]))
                return [t]
            return self.for_loop(pb, 0, kc, args, step, "k")
        return self.for_loop(b, 0, self.rows, [ap], panel, "ip", step=mr)[0]

    def lhs_element(self, b: KernelBuilder, m: SSAValue, k: SSAValue) -> SSAValue:
        op = self.op
        idx = list(b.insert(ApplyIndexingOp(op.maps[0], [self.bi, m, b.index(0), k])).results)
        value = b.add(tensor.ExtractOp(op.lhs, idx, op.lhs.type.element_type))
        return b.add(arith.ExtFOp(value, f32)) if value.type != f32 else value

    # -- the micro-kernel -------------------------------------------------------------------------
    def tile(self, b: KernelBuilder, state: dict[str, SSAValue], cacc: SSAValue, ir: SSAValue, jr: SSAValue,
             k0: SSAValue, kc: int, first: bool) -> SSAValue:
        """One MR x NR register block over this K block; returns Cacc with the tile written."""
        mr, nr, vecs = self.mr, self.nr, self.nr // LANES
        c_base = _add(b, _mul(b, ir, self.ncp), jr)
        c_offsets = [_add(b, c_base, r * self.ncp + v * LANES) for r in range(mr) for v in range(vecs)]
        if first:
            accs = [b.constant(0.0, _vtype())] * (mr * vecs)
        else:
            accs = [_read(b, cacc, at) for at in c_offsets]
        b_base = _mul(b, jr, self.kc)
        if self.pack_a:
            a_base = _mul(b, ir, self.kc)
            rows = []
        else:
            a_base = None
            rows = [_min(b, _add(b, _add(b, self.m0, ir), r), self.m_total - 1) for r in range(mr)]
        bp, ap = state["bp"], state.get("ap")

        def step(sb: KernelBuilder, k: SSAValue, b_at: SSAValue, a_at: SSAValue | None, acc: list[SSAValue]
                 ) -> list[SSAValue]:
            if self.prefetch:
                sb.insert(PrefetchOp(bp, _add(sb, b_at, self.prefetch * nr)))
            w = [_read(sb, bp, _add(sb, b_at, v * LANES) if v else b_at) for v in range(vecs)]
            out = []
            for r in range(mr):
                if self.pack_a:
                    a = sb.add(tensor.ExtractOp(ap, [_add(sb, a_at, r) if r else a_at], f32))
                else:
                    a = self.lhs_element(sb, rows[r], _add(sb, k0, k))
                a = sb.add(vector.BroadcastOp(a, _vtype()))
                out += [sb.add(math.FmaOp(a, w[v], acc[r * vecs + v])) for v in range(vecs)]
            return out

        def body(kb: KernelBuilder, k: SSAValue, args: list[SSAValue]) -> list[SSAValue]:
            if self.hoist:
                b_at, a_at, acc = args[0], args[1] if self.pack_a else None, args[1 + self.pack_a:]
            else:
                acc = args
            for u in range(self.unroll if kc % self.unroll == 0 else 1):
                kk = _add(kb, k, u) if u else k
                if not self.hoist:
                    b_at = _add(kb, b_base, _mul(kb, kk, nr))
                    a_at = _add(kb, a_base, _mul(kb, kk, mr)) if self.pack_a else None
                acc = step(kb, kk, b_at, a_at, acc)
                if self.hoist:
                    b_at = _add(kb, b_at, nr)
                    a_at = _add(kb, a_at, mr) if self.pack_a else None
            return ([b_at] + ([a_at] if self.pack_a else []) if self.hoist else []) + acc

        unroll = self.unroll if kc % self.unroll == 0 else 1
        inits = ([b_base] + ([a_base] if self.pack_a else []) if self.hoist else []) + accs
        accs = self.for_loop(b, 0, kc, inits, body, "k", step=unroll)[len(inits) - len(accs):]
        for at, acc in zip(c_offsets, accs):
            cacc = _write(b, acc, cacc, at)
        return cacc

    # -- the epilogue -------------------------------------------------------------------------------
    def epilogue(self, b: KernelBuilder, cacc: SSAValue, out: SSAValue, i0: SSAValue, i1: SSAValue, j0: SSAValue,
                 j1: SSAValue) -> SSAValue:
        """out[b, m0 + i, n0 + j] = epilogue(Cacc[i, j]) for i in [i0, i1), j in [j0, j1)."""
        op = self.op
        out_map = op.maps[2]

        def row(rb: KernelBuilder, i: SSAValue, args: list[SSAValue]) -> list[SSAValue]:
            m = _add(rb, self.m0, i)
            c_row = _mul(rb, i, self.ncp)

            def element(eb: KernelBuilder, j: SSAValue, eargs: list[SSAValue]) -> list[SSAValue]:
                n = _add(eb, self.n0, j)
                acc = eb.add(tensor.ExtractOp(cacc, [_add(eb, c_row, j)], f32))
                value = clone_block_body(op.epilogue.block, [acc, self.bi, m, n], eb.insertion_point)[0]
                idx = list(eb.insert(ApplyIndexingOp(out_map, [self.bi, m, n, eb.index(0)])).results)
                return [eb.add(tensor.InsertOp(value, eargs[0], idx))]
            return self.for_loop(rb, j0, j1, args, element, "j")
        return self.for_loop(b, i0, i1, [out], row, "i")[0]


def lower_packed(op: MatmulOp) -> None:
    PackedLowering(op).lower()


__all__ = ["LANES", "PackedLowering", "lower_packed"]
