"""The packed form of `lower-matmul`: BLIS's macro-kernel over packed, zero-padded panels with an
explicit vector register block (issue 17 step 3; Low et al. 2016, Goto & van de Geijn 2008).

A block matmul that `transform.hlocc.pack` marked (`packed`, after `tile` and `microkernel`)
computes its MC x NC block of the output as

    Cacc, Bp, Ap = per-block scratch (xla.allocate_shared: a stack buffer of the block function)
    for each K block [k0, k0 + kc) (one loop over the blocks of the full kc; a shorter last block
    apart, so each has a constant kc):
      pack B: Bp[jr/NR][k][0:NR] = rhs(b, n0+jr+l, k0+k), columns past N zero     (loop 4's panel)
      pack A: Ap[ir/MR][k][0:MR] = lhs(b, m0+ir+r, k0+k), rows past M zero        (loop 3's block)
      for ir in [0, rows) step MR:                                                 (loop 2)
        for jr in [0, cols) step NR:                                               (loop 1)
          MR x NR/L vector<L x f32> accumulators (L lanes) = 0 (first K block) or Cacc's tile (a branch)
          for k in [0, kc): NR/L vectors of Bp, MR broadcasts of Ap, MR x NR/16 math.fma
          Cacc's tile = the accumulators        (full vectors: Cacc is padded; tile-major, `c_tile`)
          [fuse_epilogue, last K block: the epilogue of the tile's elements inside the problem]
    [otherwise: the epilogue of every element of the block inside the problem, from Cacc]

The A micro-panel (MR x KC) stays in L1 across a row of register blocks; the B micro-panels
stream from the packed B panel in L2 (NR = 64 is 256 bytes a step, a fifth of L2's bandwidth).

Edges need no masks: the panels are zero-padded to whole register blocks and only the
epilogue, a loop with run-time bounds, looks at the problem's edge (BLIS handles edges the same
way, through a temporary tile). Without `A` in `packed` the micro-kernel broadcasts lhs
elements straight from the operand through its map (rows past M clamped to the last row: what
they compute is never stored). `hoist_address`: the micro-kernel's panel offsets are loop-carried
and advanced by MR and NR each step instead of recomputed from k. `prefetch` = d: each step also
prefetches the B panel d steps ahead (`xla.prefetch`, LLVM's prefetch intrinsic; near a panel's
end the address may lie past the buffer, which a prefetch tolerates: it never faults).

Offset tables (an implicit gemm's input): the packing reads through a per-block table of the
offsets that are not affine (packed_ops.py's module doc).

Prepacked B (`prepacked`, `pack ... prepacked`): B arrives packed, in `schedule/pack.panel_layout`
(NR-wide panels of all of K, the last zero-padded, linearised: a constant packed once outside the
kernel by `schedule/pack.pack_panels`); there is no Bp, and the micro-kernel reads B's micro-panel
at (n0 + jr) * K + k0 * NR + k * NR in the operand itself. A run-time M (`runtime_m`): the block's
rows, the A clamp and the packing's padding test use the value read from the kernel's table of
dimension variables.
`row_tails` (microkernel): the last register block of a block with fewer than MR rows left runs
at their height (one copy of the tile's code per height 1..MR, chosen per tile), instead of MR rows
of which the extra ones (clamped to the last row) are dropped.

Direct stores: a fused epilogue that stores the f32 sum as it is (`xla.yield %acc`), into a rank-1
output whose map steps by 1 along n, with one K block, stores a whole NR-wide tile's vectors straight
into the output (no Cacc round trip, no element loop); a tile cut by the problem's last column (the
last, partial panel) goes through Cacc and the element loop, which stores only the columns inside.

bf16 (`k_pairs`, `pack ... k_pairs` on bf16 operands, legal only on AVX512-BF16 targets): packed
elements are i32 pairs (k, k + 1) of bf16 bits, an odd K block's last pair (k, 0), and the micro-kernel's
step is `xla.dot_bf16_pairs` (vdpbf16ps): per lane acc + a.k * b.k + a.k1 * b.k1, the products
exact in f32, the sum rounded to nearest even, with the instruction's flush of denormal inputs
and results. The epilogue rounds the f32 sum to the dot's type, as XLA rounds a bf16 dot.

Numerics: every (b, m, n) sums its products in k order, one fused multiply-add per step, in f32:
exact on integer-valued inputs, the order of BLAS micro-kernels otherwise. The epilogue rounds the
sum to the dot's type as the naive form does.
"""

from __future__ import annotations

from xdsl.dialects import arith, func, math, tensor, vector
from xdsl.dialects.builtin import TensorType, VectorType, f32, i16, i32
from xdsl.ir import SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from hlocc.analysis.affine_expr import Const, Expr, Var, dim, evaluate, linear_form
from hlocc.analysis.indexing_map import IndexingMap, Variable
from hlocc.analysis.interval import Interval
from hlocc.codegen.ir import AllocateSharedOp, ApplyIndexingOp
from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.ir.matmul_ops import DotBF16PairsOp, MatmulOp, PrefetchOp
from hlocc.codegen.transforms.matmul.packed_ops import (
    CONSTANT_OFFSETS,
    add_index,
    identity_epilogue,
    if_else,
    k_rolled_for_loop,
    lanes,
    min_index,
    mul_index,
    read_vector,
    separable_offsets,
    sub_index,
    unit_stride_in_n,
    vector_type,
    write_vector,
)
from hlocc.codegen.transforms.util import clone_block_body, if_then


class PackedLowering:
    """Builds the packed form of one block matmul (module doc)."""

    def __init__(self, op: MatmulOp):
        self.for_loop = k_rolled_for_loop
        self.op = op
        self.mr, self.nr = op.register_block.get_values()
        self.lanes = lanes()
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
        # bf16 pairs: a packed element is an i32 holding (k, k + 1) for the dot-product instruction.
        self.pairs = op.k_pairs is not None
        self.elem = i32 if self.pairs else f32
        self.depth = -(-self.kc // 2) if self.pairs else self.kc  # packed steps of a full K block
        self.prepacked = op.prepacked is not None  # B's panels are the operand itself (module doc)
        self.row_tails = op.row_tails is not None
        self.direct = (self.fuse and self.k_total <= self.kc and not self.pairs and identity_epilogue(op)
                       and unit_stride_in_n(op))
        # An operand through a table of its rows' or columns' offsets (`offset_table`), where its
        # map is separable and not affine in m (A) or n (B): an implicit gemm's input, whose
        # output positions are divisions and remainders of m or n.
        self.split: dict[int, tuple[Expr, Expr]] = {}
        self.narrow = [t.type.element_type.bitwidth == 16 if hasattr(t.type.element_type, "bitwidth") else False
                       for t in (op.lhs, op.rhs)]
        for operand, t, packs in ((0, op.lhs, self.pack_a), (1, op.rhs, not self.prepacked)):
            split = separable_offsets(op.maps[operand], list(t.type.get_shape()), 1 + operand) if packs else None
            if split is not None and not all(isinstance(a, Var) for a in linear_form(split[1])[0]):
                self.split[operand] = split
        # A 16-bit B whose one block spans all of N: constant offsets, no table (`pack_b_constant`).
        self.b_constant = (1 in self.split and self.narrow[1] and self.nc >= self.n_total
                           and self.n_total <= CONSTANT_OFFSETS)

    # -- scratch ----------------------------------------------------------------------------------
    def scratch(self) -> dict[str, SSAValue]:
        """The block's buffers, allocated at the top of the kernel's entry function."""
        fn = self.op.parent_op()
        while not isinstance(fn, func.FuncOp):
            fn = fn.parent_op()
        b = KernelBuilder(InsertPoint.at_start(fn.body.block))
        sizes = {"cacc": (self.mcp * self.ncp, f32)}
        if not self.prepacked:
            sizes["bp"] = (self.depth * self.ncp, self.elem)
        if self.pack_a:
            sizes["ap"] = (self.mcp * self.depth, self.elem)
        if 0 in self.split:
            sizes["aoff"] = (self.mcp, i32)
        if 1 in self.split and not self.b_constant:
            sizes["boff"] = (self.ncp, i32)
        return {name: b.add(AllocateSharedOp(TensorType(t, [n]))) for name, (n, t) in sizes.items()}

    # -- the whole block ----------------------------------------------------------------------------
    def lower(self) -> None:
        op = self.op
        b = KernelBuilder(InsertPoint.before(op))
        self.bi, self.m0, self.n0 = op.offsets
        self.m_total = op.m_value(b)  # a constant, or the run-time M
        self.m_last = self.m_total - 1 if isinstance(self.m_total, int) else sub_index(b, self.m_total, b.index(1))
        self.rows = min_index(b, sub_index(b, self.m_total, self.m0), self.mc)
        self.cols = min_index(b, sub_index(b, self.n_total, self.n0), self.nc)
        state = {**self.scratch(), "out": op.init}
        for operand, name in enumerate(("aoff", "boff")):
            if name in state:
                state[name] = self.offset_table(b, operand, state[name])
        last = ((self.k_total - 1) // self.kc) * self.kc
        tail = self.k_total - last
        # One copy of the K block's code for all blocks of the full kc (the first one's zero
        # accumulators and the last one's fused epilogue chosen at run time, once per tile), and a
        # second only for a shorter last block: each copy is a micro-kernel and two packing loops,
        # and peeling the first and last blocks tripled the kernel's compile time (1.8 s against
        # 0.7 s for one block, 64x128x512) for a branch per tile and K block.
        looped = last + (tail if tail == self.kc else 0)
        if looped > self.kc:
            names = list(state)

            def blocks(ib: KernelBuilder, k0: SSAValue, args: list[SSAValue]) -> list[SSAValue]:
                first = ib.cmpi("ne", k0, ib.index(0))  # true: not the first block
                final = ib.cmpi("eq", k0, ib.index(last)) if looped > last else False
                s = self.k_block(ib, dict(zip(names, args)), k0, self.kc, first=first, final=final)
                return [s[n] for n in names]
            state = dict(zip(names, self.for_loop(b, 0, looped, [state[n] for n in names], blocks, "kc",
                                                  step=self.kc)))
        elif last > 0:  # two blocks
            state = self.k_block(b, state, b.index(0), self.kc, first=True, final=False)
        if looped <= last or looped == self.kc:  # the last block apart (or the only one)
            state = self.k_block(b, state, b.index(last), tail, first=last == 0, final=True)
        out = state["out"] if self.fuse else self.block_epilogue(b, state["cacc"], state["out"])
        op.result.replace_all_uses_with(out)
        Rewriter.erase_op(op)

    def k_block(self, b: KernelBuilder, state: dict[str, SSAValue], k0: SSAValue, kc: int,
                first: bool | SSAValue, final: bool | SSAValue) -> dict[str, SSAValue]:
        """The K block at k0 of kc: pack its panels and run every tile's micro-kernel. `first`:
        the accumulators start at zero (True), from Cacc (False), or a run-time `k0 != 0` chooses
        Cacc; `final`: the fused epilogue follows (True, False, or a run-time condition)."""
        state = dict(state)
        if not self.prepacked:
            state["bp"] = self.pack_b(b, state["bp"], k0, kc, state.get("boff"))
        if self.pack_a:
            state["ap"] = self.pack_a_block(b, state["ap"], k0, kc, state.get("aoff"))
        names = ["cacc", "out"]

        def ir_body(ib: KernelBuilder, ir: SSAValue, args: list[SSAValue]) -> list[SSAValue]:
            def jr_body(jb: KernelBuilder, jr: SSAValue, jargs: list[SSAValue]) -> list[SSAValue]:
                if not self.row_tails:
                    return self.tile_work(jb, state, jargs, ir, jr, k0, kc, first, final, self.mr)
                left = sub_index(jb, self.rows, ir)

                def height(hb: KernelBuilder, h: int) -> list[SSAValue]:  # h rows, or fewer
                    if h == 1:
                        return self.tile_work(hb, state, jargs, ir, jr, k0, kc, first, final, 1)
                    return if_else(hb, hb.cmpi("sge", left, hb.index(h)),
                                    lambda tb: self.tile_work(tb, state, jargs, ir, jr, k0, kc, first, final, h),
                                    lambda eb: height(eb, h - 1))
                return height(jb, self.mr)
            return self.for_loop(ib, 0, self.cols, args, jr_body, "jr", step=self.nr)

        cacc, out = self.for_loop(b, 0, self.rows, [state[n] for n in names], ir_body, "ir", step=self.mr)
        state["cacc"], state["out"] = cacc, out
        return state

    def tile_work(self, b: KernelBuilder, state: dict[str, SSAValue], args: list[SSAValue], ir: SSAValue,
                  jr: SSAValue, k0: SSAValue, kc: int, first: bool | SSAValue, final: bool | SSAValue,
                  height: int) -> list[SSAValue]:
        """[Cacc, out] after the register block at (ir, jr) of `height` rows: its sums, then Cacc and
        the fused epilogue, or (direct stores, a tile inside the problem's columns) the output."""
        cacc, out = args

        def through_cacc(cb: KernelBuilder) -> list[SSAValue]:
            c = self.tile(cb, state, cacc, ir, jr, k0, kc, first, height)
            o = out
            if self.fuse and isinstance(final, SSAValue):
                o = if_then(cb, final, lambda eb: [self.epilogue(eb, c, o, ir, jr)], [o])[0]
            elif self.fuse and final:
                o = self.epilogue(cb, c, o, ir, jr)
            return [c, o]

        if not self.direct:
            return through_cacc(b)

        def direct(db: KernelBuilder) -> list[SSAValue]:
            return [cacc, self.store_tile(db, self.sums(db, state, cacc, ir, jr, k0, kc, True, height), out, ir, jr,
                                          height)]
        if self.n_total % self.nr == 0 and self.nc % self.nr == 0:  # every tile is whole
            return direct(b)
        whole = b.cmpi("sle", add_index(b, jr, self.nr), self.cols)
        return if_else(b, whole, direct, through_cacc)

    def store_tile(self, b: KernelBuilder, accs: list[SSAValue], out: SSAValue, ir: SSAValue, jr: SSAValue,
                   height: int) -> SSAValue:
        """The tile's vectors stored straight into the output (direct stores: module doc), its rows
        past the block's skipped (none are with row_tails: the tile has the rows left)."""
        vecs = self.nr // self.lanes
        out_map = self.op.maps[2]
        left = None if self.row_tails else sub_index(b, self.rows, ir)

        def row(rb: KernelBuilder, r: int, o: SSAValue) -> list[SSAValue]:
            m = add_index(rb, add_index(rb, self.m0, ir), r)
            (at,) = rb.insert(ApplyIndexingOp(out_map, [self.bi, m, add_index(rb, self.n0, jr), rb.index(0)])).results
            for v in range(vecs):
                o = write_vector(rb, accs[r * vecs + v], o, add_index(rb, at, v * self.lanes) if v else at)
            return [o]

        for r in range(height):
            if left is None or r == 0:
                out = row(b, r, out)[0]
            else:
                out = if_then(b, b.cmpi("slt", b.index(r), left), lambda rb, r=r, o=out: row(rb, r, o), [out])[0]
        return out

    # -- packing ----------------------------------------------------------------------------------
    def offset_table(self, b: KernelBuilder, operand: int, table: SSAValue) -> SSAValue:
        """table[j] = G(m0 + j) for the block's rows (A, operand 0) or G(n0 + j) for its columns
        (B) (`separable_offsets`), once per block: the packing of every K block then reads the
        operand at F(b, k) + table[j], the index arithmetic of m or n (an output position's
        divisions and remainders) out of the per-element loop."""
        g_map = IndexingMap(self.op.maps[operand].dims, (self.split[operand][1],))

        def entry(eb: KernelBuilder, j: SSAValue, args: list[SSAValue]) -> list[SSAValue]:
            zero = eb.index(0)
            point = ([self.bi, add_index(eb, self.m0, j), zero, zero] if operand == 0 else
                     [self.bi, zero, add_index(eb, self.n0, j), zero])
            (g,) = eb.insert(ApplyIndexingOp(g_map, point)).results
            return [eb.add(tensor.InsertOp(eb.add(arith.IndexCastOp(g, i32)), args[0], [j]))]
        return self.for_loop(b, 0, self.rows if operand == 0 else self.cols, [table], entry, "j")[0]

    def table_entry(self, b: KernelBuilder, table: SSAValue, j: SSAValue) -> SSAValue:
        """table[j] as an index."""
        return b.add(arith.IndexCastOp(b.add(tensor.ExtractOp(table, [j], i32)), b.index(0).type))

    def pack_b(self, b: KernelBuilder, bp: SSAValue, k0: SSAValue, kc: int, table: SSAValue | None = None
               ) -> SSAValue:
        """Bp[jr * depth + k * NR + l] = rhs(b, n0 + jr + l, k0 + k) (a (2k, 2k + 1) pair with
        `k_pairs`); zero past the block's columns. Rows of B outside, micro-panels inside: a
        row-major B is read one contiguous row of the block at a time (one page per row; panels
        outside touched every row's page once per panel, a TLB miss per 64 elements). With a
        `table` of the columns' offsets, rhs is read at F(b, k) + table[jr + l] (`offset_table`)."""
        nr = self.nr
        if self.b_constant:
            return self.pack_b_constant(b, bp, k0, kc)
        if table is not None and self.narrow[1]:
            return self.pack_b_by_panel(b, bp, k0, kc, table)

        def row(rb: KernelBuilder, k: SSAValue, rargs: list[SSAValue]) -> list[SSAValue]:
            row_at = mul_index(rb, k, nr)

            def panel(pb: KernelBuilder, jr: SSAValue, args: list[SSAValue]) -> list[SSAValue]:
                count = min_index(pb, sub_index(pb, self.cols, jr), nr)
                n_base = add_index(pb, self.n0, jr)
                at = add_index(pb, mul_index(pb, jr, self.depth), row_at)

                def copy(cb: KernelBuilder, lane: SSAValue, cargs: list[SSAValue]) -> list[SSAValue]:
                    if table is None:
                        n = add_index(cb, n_base, lane)
                        value = self.packed_value(cb, lambda eb, kk: self.element(eb, 1, n, kk), k0, k, kc)
                    else:
                        g = self.table_entry(cb, table, add_index(cb, jr, lane))
                        value = self.packed_value(cb, lambda eb, kk: self.element_at(eb, 1, g, kk), k0, k, kc)
                    return [cb.add(tensor.InsertOp(value, cargs[0], [add_index(cb, at, lane)]))]

                def zero(cb: KernelBuilder, lane: SSAValue, cargs: list[SSAValue]) -> list[SSAValue]:
                    return [cb.add(tensor.InsertOp(self.zero(cb), cargs[0], [add_index(cb, at, lane)]))]

                t = self.for_loop(pb, 0, count, args, copy, "l")
                return self.for_loop(pb, count, nr, t, zero, "l")
            return self.for_loop(rb, 0, self.cols, rargs, panel, "jp", step=nr)
        return self.for_loop(b, 0, self.steps(kc), [bp], row, "k")[0]

    def pack_b_constant(self, b: KernelBuilder, bp: SSAValue, k0: SSAValue, kc: int) -> SSAValue:
        """`pack_b` for a 16-bit B whose one block spans all of N (n0 = 0): each row's columns
        unrolled, every column's offset G(n) a constant (an address's displacement), no table
        read. Micro-panel by micro-panel, the CNN's first convolution in bf16 (256 positions)
        took 81-82 µs; where LLVM folded the table into such constants by itself, 53-59."""
        nr, g = self.nr, self.split[1][1]
        offsets = [evaluate(g, lambda v, n=n: n if v == dim(2) else 0) for n in range(self.n_total)]
        columns = -(-self.n_total // nr) * nr

        def row(rb: KernelBuilder, k: SSAValue, rargs: list[SSAValue]) -> list[SSAValue]:
            row_at = mul_index(rb, k, nr)
            t = rargs[0]
            for n in range(columns):
                panel, lane = divmod(n, nr)
                if n < self.n_total:
                    value = self.packed_value(rb, lambda eb, kk, n=n: self.element_at(eb, 1, eb.index(offsets[n]), kk),
                                              k0, k, kc)
                else:
                    value = self.zero(rb)
                t = rb.add(tensor.InsertOp(value, t, [add_index(rb, row_at, panel * nr * self.depth + lane)]))
            return [t]
        return self.for_loop(b, 0, self.steps(kc), [bp], row, "k")[0]

    def pack_b_by_panel(self, b: KernelBuilder, bp: SSAValue, k0: SSAValue, kc: int, table: SSAValue) -> SSAValue:
        """`pack_b` through the offset table for a 16-bit B: micro-panels outside, rows inside, a
        whole panel's NR offsets read from the table once and each row's NR lanes unrolled (the
        block's last, partial panel: a loop over its lanes). There is no 16-bit gather: rows
        outside, LLVM vectorized the lane loop into a vector load of offsets, an extract, a
        scalar load and an insert per element (the 7x7/2 stem in bf16, 784 positions: 15-20%
        slower than the per-element division it replaced); with the offsets loop-invariant each
        element is one load from a register's offset (as where the table folded to constants)."""
        nr = self.nr

        def panel(pb: KernelBuilder, jr: SSAValue, args: list[SSAValue]) -> list[SSAValue]:
            count = min_index(pb, sub_index(pb, self.cols, jr), nr)
            base = mul_index(pb, jr, self.depth)

            def read(g: SSAValue):
                return lambda eb, kk: self.element_at(eb, 1, g, kk)

            def whole(wb: KernelBuilder) -> list[SSAValue]:
                offsets = [self.table_entry(wb, table, add_index(wb, jr, lane)) for lane in range(nr)]

                def row(rb: KernelBuilder, k: SSAValue, rargs: list[SSAValue]) -> list[SSAValue]:
                    at = add_index(rb, base, mul_index(rb, k, nr))
                    t = rargs[0]
                    for lane, g in enumerate(offsets):
                        value = self.packed_value(rb, read(g), k0, k, kc)
                        t = rb.add(tensor.InsertOp(value, t, [add_index(rb, at, lane)]))
                    return [t]
                return self.for_loop(wb, 0, self.steps(kc), args, row, "k")

            def partial(eb: KernelBuilder) -> list[SSAValue]:  # the block's last panel: a lane loop
                def row(rb: KernelBuilder, k: SSAValue, rargs: list[SSAValue]) -> list[SSAValue]:
                    at = add_index(rb, base, mul_index(rb, k, nr))

                    def copy(cb: KernelBuilder, lane: SSAValue, cargs: list[SSAValue]) -> list[SSAValue]:
                        entry = self.table_entry(cb, table, add_index(cb, jr, lane))
                        value = self.packed_value(cb, read(entry), k0, k, kc)
                        return [cb.add(tensor.InsertOp(value, cargs[0], [add_index(cb, at, lane)]))]

                    def zero(cb: KernelBuilder, lane: SSAValue, cargs: list[SSAValue]) -> list[SSAValue]:
                        return [cb.add(tensor.InsertOp(self.zero(cb), cargs[0], [add_index(cb, at, lane)]))]
                    return self.for_loop(rb, count, nr, self.for_loop(rb, 0, count, rargs, copy, "l"), zero, "l")
                return self.for_loop(eb, 0, self.steps(kc), args, row, "k")
            if self.n_total % nr == 0 and self.nc % nr == 0:  # every panel is whole
                return whole(pb)
            return if_else(pb, pb.cmpi("eq", count, pb.index(nr)), whole, partial)
        return self.for_loop(b, 0, self.cols, [bp], panel, "jp", step=nr)[0]

    def steps(self, kc: int) -> int:
        """Packed steps of a K block of kc (pairs round up: an odd K's last pair is (k, 0))."""
        return -(-kc // 2) if self.pairs else kc

    def zero(self, b: KernelBuilder) -> SSAValue:
        return b.constant(0, i32) if self.pairs else b.constant(0.0, f32)

    def element(self, b: KernelBuilder, operand: int, mn: SSAValue, k: SSAValue) -> SSAValue:
        """lhs(b, mn, k) (operand 0) or rhs(b, mn, k) (1): f32, or its 16 bits in an i32 for pairs."""
        op = self.op
        t = (op.lhs, op.rhs)[operand]
        point = [self.bi, mn, b.index(0), k] if operand == 0 else [self.bi, b.index(0), mn, k]
        idx = list(b.insert(ApplyIndexingOp(op.maps[operand], point)).results)
        return self.widened(b, b.add(tensor.ExtractOp(t, idx, t.type.element_type)))

    def element_at(self, b: KernelBuilder, operand: int, g: SSAValue, k: SSAValue) -> SSAValue:
        """lhs (0) or rhs (1) at the linear offset F(b, k) + g (`offset_table`), as `element`. The
        offset goes in as the minor index with the others zero: flatten-tensors linearises the
        indices row-major, which gives exactly that offset (F's part is loop-invariant in the
        packing's loop over rows or columns)."""
        op = self.op
        t = (op.lhs, op.rhs)[operand]
        m, rank = op.maps[operand], t.type.get_num_dims()
        dims = (*m.dims, Variable(Interval(0, t.type.element_count() - 1), "g"))
        at = IndexingMap(dims, (*(Const(0),) * (rank - 1), self.split[operand][0] + dim(4)))
        zero = b.index(0)
        idx = list(b.insert(ApplyIndexingOp(at, [self.bi, zero, zero, k, g])).results)
        return self.widened(b, b.add(tensor.ExtractOp(t, idx, t.type.element_type)))

    def widened(self, b: KernelBuilder, value: SSAValue) -> SSAValue:
        """An operand's element as the packed panels hold it."""
        if self.pairs:
            return b.add(arith.ExtUIOp(b.add(arith.BitcastOp(value, i16)), i32))
        return b.add(arith.ExtFOp(value, f32)) if value.type != f32 else value

    def packed_value(self, b: KernelBuilder, read, k0: SSAValue, k: SSAValue, kc: int) -> SSAValue:
        """The packed element of step k of the K block at k0: read(b, k0 + k), or with pairs
        read(2k) | read(2k + 1) << 16, the second zero past the block's kc."""
        if not self.pairs:
            return read(b, add_index(b, k0, k))
        k_even = add_index(b, k0, mul_index(b, k, 2))
        low = read(b, k_even)
        if kc % 2 == 0:
            high = read(b, add_index(b, k_even, 1))
        else:  # the last pair of an odd block: (k, 0); k + 1 clamped to stay inside the operand
            inside = b.cmpi("slt", add_index(b, mul_index(b, k, 2), 1), b.index(kc))
            k_odd = min_index(b, add_index(b, k_even, 1), self.k_total - 1)
            high = b.select(inside, read(b, k_odd), b.constant(0, i32))
        return b.add(arith.OrIOp(low, b.add(arith.ShLIOp(high, b.constant(16, i32)))))

    def pack_a_block(self, b: KernelBuilder, ap: SSAValue, k0: SSAValue, kc: int, table: SSAValue | None = None
                     ) -> SSAValue:
        """Ap[ir * depth + k * MR + r] = lhs(b, m0 + ir + r, k0 + k) (pairs as for B); zero past
        the problem's rows. With a `table` of the rows' offsets, lhs is read at F(b, k) +
        table[ir + r] (`offset_table`; a row past the block reads the block's last)."""
        mr = self.mr

        def panel(pb: KernelBuilder, ir: SSAValue, args: list[SSAValue]) -> list[SSAValue]:
            rows = [add_index(pb, add_index(pb, self.m0, ir), r) for r in range(mr)]
            total = pb.index(self.m_total) if isinstance(self.m_total, int) else self.m_total
            inside = [pb.cmpi("slt", m, total) for m in rows]
            base = mul_index(pb, ir, self.depth)
            if table is None:
                clamped = [min_index(pb, m, self.m_last) for m in rows]
                reads = [lambda eb, kk, m=m: self.element(eb, 0, m, kk) for m in clamped]
            else:
                last = sub_index(pb, self.rows, pb.index(1))
                offsets = [self.table_entry(pb, table, min_index(pb, add_index(pb, ir, r), last)) for r in range(mr)]
                reads = [lambda eb, kk, g=g: self.element_at(eb, 0, g, kk) for g in offsets]

            def step(kb: KernelBuilder, k: SSAValue, kargs: list[SSAValue]) -> list[SSAValue]:
                at = add_index(kb, base, mul_index(kb, k, mr))
                t = kargs[0]
                for r in range(mr):
                    value = self.packed_value(kb, reads[r], k0, k, kc)
                    t = kb.add(tensor.InsertOp(kb.select(inside[r], value, self.zero(kb)), t, [add_index(kb, at, r)]))
                return [t]
            return self.for_loop(pb, 0, self.steps(kc), args, step, "k")
        return self.for_loop(b, 0, self.rows, [ap], panel, "ip", step=mr)[0]

    # -- the micro-kernel -------------------------------------------------------------------------
    def tile(self, b: KernelBuilder, state: dict[str, SSAValue], cacc: SSAValue, ir: SSAValue, jr: SSAValue,
             k0: SSAValue, kc: int, first: bool | SSAValue, height: int) -> SSAValue:
        """One `height` x NR register block (height <= MR) over this K block; returns Cacc with the
        tile written. `first` as for `k_block`."""
        accs = self.sums(b, state, cacc, ir, jr, k0, kc, first, height)
        c_base = self.c_tile(b, ir, jr)
        vecs = self.nr // self.lanes
        for i, acc in enumerate(accs):
            r, v = divmod(i, vecs)
            cacc = write_vector(b, acc, cacc, add_index(b, c_base, r * self.nr + v * self.lanes) if i else c_base)
        return cacc

    def sums(self, b: KernelBuilder, state: dict[str, SSAValue], cacc: SSAValue, ir: SSAValue, jr: SSAValue,
             k0: SSAValue, kc: int, first: bool | SSAValue, height: int) -> list[SSAValue]:
        """The `height` x NR/L accumulators of the register block at (ir, jr) after this K block,
        row-major: from zero or Cacc (`first` as for `k_block`: a run-time condition is true where
        the tile is read from Cacc), then the micro-kernel's k loop."""
        mr, nr, vecs = height, self.nr, self.nr // self.lanes  # (packed A's micro-panels keep MR rows a step)
        def from_cacc(rb: KernelBuilder) -> list[SSAValue]:
            c_base = self.c_tile(rb, ir, jr)
            return [read_vector(rb, cacc, add_index(rb, c_base, r * nr + v * self.lanes) if r or v else c_base)
                    for r in range(mr) for v in range(vecs)]
        if isinstance(first, SSAValue):
            accs = if_then(b, first, from_cacc, [b.constant(0.0, vector_type())] * (mr * vecs))
        elif first:
            accs = [b.constant(0.0, vector_type())] * (mr * vecs)
        else:
            accs = from_cacc(b)
        if self.prepacked:  # panel (n0 + jr) / NR of the operand, from row k0: ((n0 + jr) * K + k0 * NR)
            panel = b.add(arith.MuliOp(add_index(b, self.n0, jr), b.index(self.k_total)))
            b_base = add_index(b, panel, mul_index(b, k0, nr))
        else:
            b_base = mul_index(b, jr, self.depth)
        if self.pack_a:
            a_base = mul_index(b, ir, self.depth)
            rows = []
        else:
            a_base = None
            rows = [min_index(b, add_index(b, add_index(b, self.m0, ir), r), self.m_last) for r in range(mr)]
        bp, ap = (self.op.rhs if self.prepacked else state["bp"]), state.get("ap")
        steps = self.steps(kc)
        unroll = self.unroll if steps % self.unroll == 0 else 1

        def step(sb: KernelBuilder, k: SSAValue, b_at: SSAValue, a_at: SSAValue | None, acc: list[SSAValue]
                 ) -> list[SSAValue]:
            if self.prefetch:
                sb.insert(PrefetchOp(bp, add_index(sb, b_at, self.prefetch * nr)))
            w = [read_vector(sb, bp, add_index(sb, b_at, v * self.lanes) if v else b_at) for v in range(vecs)]
            out = []
            for r in range(mr):
                if self.pack_a:
                    a = sb.add(tensor.ExtractOp(ap, [add_index(sb, a_at, r) if r else a_at], self.elem))
                else:
                    a = self.packed_value(sb, lambda eb, kk, m=rows[r]: self.element(eb, 0, m, kk), k0, k, kc)
                a = sb.add(vector.BroadcastOp(a, VectorType(self.elem, [self.lanes])))
                if self.pairs:
                    out += [sb.add(DotBF16PairsOp(acc[r * vecs + v], a, w[v])) for v in range(vecs)]
                else:
                    out += [sb.add(math.FmaOp(a, w[v], acc[r * vecs + v])) for v in range(vecs)]
            return out

        def body(kb: KernelBuilder, k: SSAValue, args: list[SSAValue]) -> list[SSAValue]:
            if self.hoist:
                b_at, a_at, acc = args[0], args[1] if self.pack_a else None, args[1 + self.pack_a:]
            else:
                acc = args
            for u in range(unroll):
                kk = add_index(kb, k, u) if u else k
                if not self.hoist:
                    b_at = add_index(kb, b_base, mul_index(kb, kk, nr))
                    a_at = add_index(kb, a_base, mul_index(kb, kk, self.mr)) if self.pack_a else None
                acc = step(kb, kk, b_at, a_at, acc)
                if self.hoist:
                    b_at = add_index(kb, b_at, nr)
                    a_at = add_index(kb, a_at, self.mr) if self.pack_a else None
            return ([b_at] + ([a_at] if self.pack_a else []) if self.hoist else []) + acc

        inits = ([b_base] + ([a_base] if self.pack_a else []) if self.hoist else []) + accs
        return self.for_loop(b, 0, steps, inits, body, "k", step=unroll)[len(inits) - len(accs):]

    # -- the epilogue -------------------------------------------------------------------------------
    def c_tile(self, b: KernelBuilder, ir: SSAValue, jr: SSAValue) -> SSAValue:
        """Cacc's offset of the register block at (ir, jr). Cacc is tile-major: each MR x NR tile
        is contiguous (row r of it at r * NR), the tiles of a row of blocks one after another, so
        that the tile's load and store per K block are one sequential run that the hardware
        prefetcher follows (row-major, its MR rows were NC apart: a miss per row once Cacc left L2)."""
        return add_index(b, mul_index(b, ir, self.ncp), mul_index(b, jr, self.mr))

    def block_epilogue(self, b: KernelBuilder, cacc: SSAValue, out: SSAValue) -> SSAValue:
        """The epilogue of every tile of the block (without `fuse_epilogue`)."""
        def ir_body(ib: KernelBuilder, ir: SSAValue, args: list[SSAValue]) -> list[SSAValue]:
            return self.for_loop(ib, 0, self.cols, args, lambda jb, jr, a: [self.epilogue(jb, cacc, a[0], ir, jr)],
                                 "jr", step=self.nr)
        return self.for_loop(b, 0, self.rows, [out], ir_body, "ir", step=self.mr)[0]

    def epilogue(self, b: KernelBuilder, cacc: SSAValue, out: SSAValue, ir: SSAValue, jr: SSAValue) -> SSAValue:
        """out[b, m0 + ir + r, n0 + jr + c] = epilogue(the tile's element (r, c)) for the tile's
        elements inside the problem."""
        op = self.op
        out_map = op.maps[2]
        tile = self.c_tile(b, ir, jr)
        rows = min_index(b, sub_index(b, self.rows, ir), self.mr)
        cols = min_index(b, sub_index(b, self.cols, jr), self.nr)
        m_base, n_base = add_index(b, self.m0, ir), add_index(b, self.n0, jr)

        def row(rb: KernelBuilder, r: SSAValue, args: list[SSAValue]) -> list[SSAValue]:
            m = add_index(rb, m_base, r)
            c_row = add_index(rb, tile, mul_index(rb, r, self.nr))

            def element(eb: KernelBuilder, c: SSAValue, eargs: list[SSAValue]) -> list[SSAValue]:
                n = add_index(eb, n_base, c)
                acc = eb.add(tensor.ExtractOp(cacc, [add_index(eb, c_row, c)], f32))
                value = clone_block_body(op.epilogue.block, [acc, self.bi, m, n], eb.insertion_point)[0]
                idx = list(eb.insert(ApplyIndexingOp(out_map, [self.bi, m, n, eb.index(0)])).results)
                return [eb.add(tensor.InsertOp(value, eargs[0], idx))]
            return self.for_loop(rb, 0, cols, args, element, "j")
        return self.for_loop(b, 0, rows, [out], row, "i")[0]


__all__ = ["PackedLowering"]
