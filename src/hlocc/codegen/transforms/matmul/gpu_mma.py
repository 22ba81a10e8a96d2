"""The GPU lowering of a tiled `xla.matmul` laid out over warps (`warp_grid`, `warp_tile`: set by
`transform.hlocc.set_operand_layout`; issue 17 item 4): bf16/f16 operands, f32 accumulators,
`mma.sync.m16n8k16` fed by `ldmatrix` from swizzled shared memory.

One GPU block computes one MC x NC block tile (MC = WM x TM, NC = WN x TN) of batch b at (m0, n0);
its 32 x WM x WN threads are WM x WN warps, warp w = (w / WN, w % WN) owning a TM x TN part:

    accumulators: (TM/16) x (TN/8) vector<4xf32> per thread (the m16n8 C fragments), zero
    scf.for kt over ceil(K / KC) K blocks                       (fissioned by the block simulation)
      stage A[m0 : m0+MC, kt·KC : +KC] into shared memory, row-major, and B[.., n0 : n0+NC] n-major
        (k contiguous), each thread copying elements t, t + threads, ...; an element past M, N or K
        is zero (its read clamped into the operand), so partial tiles need no other mask
      barrier
      for each k step of 16: ldmatrix.x4 per A fragment (rows of the warp's 16-row slices),
        ldmatrix.x2 per B fragment (8 columns), then mma.sync per (A, B) pair
      barrier (the next K block overwrites the tiles)
    epilogue on the fragments: element i of fragment (p, q) is row m0 + TM·wm + 16p + lane/4 + 8(i/2),
      column n0 + TN·wn + 8q + 2(lane%4) + i%2; inside the problem it is computed by the op's
      epilogue (bias, activation, convert) and stored at out_map

Operands are read through the op's maps, so transposed operands and layouts cost no copy: the
staging copy absorbs them (XLA's Triton GEMM does the same with its tiled loads). The tiles are
swizzled for ldmatrix: element (r, c) of a tile with rows of KC elements is at
r·KC + ((c/8) xor ((r/L) mod G))·8 + c mod 8, with L = max(1, 64/KC) rows per 128 bytes and G the
largest power of two dividing the KC/8 chunks of a row (KC/8 itself for the schedules' KC), so the
8 rows an ldmatrix phase reads (16 bytes each, at one k chunk) fall in 8 different 16-byte bank
groups: without it, rows 64 bytes apart (KC = 32) meet in the same banks. (A K of 48 staged whole
has 6 chunks a row: a xor by up to 7 there left the row, and the product was wrong.)

With `stages` (transform.hlocc.pipeline_shared_copies) the tiles are staged by a cp.async ring
instead: gpu_mma_pipeline.py. With `wgmma` (transform.hlocc.use_wgmma, sm_90a only) the warpgroup
MMA of gpu_wgmma.py instead (its tiles by TMA with `use_tma`: gpu_wgmma_tma.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.dialects import arith, gpu, tensor, vector
from xdsl.dialects.builtin import Float32Type, TensorType, VectorType
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from hlocc.analysis.indexing_map import IndexingMap
from hlocc.codegen.context import KernelIRError
from hlocc.codegen.ir import AllocateSharedOp, ApplyIndexingOp, LdMatrixOp, MmaSyncOp, SyncThreadsOp
from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.ir.matmul_ops import MatmulOp
from hlocc.codegen.schedule.set_operand_layout import MMA_TILE, WARP, staged_k
from hlocc.codegen.transforms.util import clone_block_body, for_loop, if_then

F32X4 = VectorType(Float32Type(), [4])


def thread_id(op: MatmulOp) -> SSAValue:
    fn: Operation | None = op
    while fn is not None and fn.name != "func.func":
        fn = fn.parent_op()
    for o in (fn.walk() if fn is not None else ()):
        if isinstance(o, gpu.ThreadIdOp):
            return o.result
    raise KernelIRError(f"'{op.name}' with a warp layout in a kernel without a thread id (the emitter gives one "
                        "when the schedule has warps)")


class Index:
    """Index arithmetic on a builder (unsigned: every value here is non-negative)."""

    def __init__(self, b: KernelBuilder):
        self.b = b

    def c(self, v: int | SSAValue) -> SSAValue:
        return self.b.index(v) if isinstance(v, int) else v

    def add(self, x, y):
        return self.b.add(arith.AddiOp(self.c(x), self.c(y)))

    def mul(self, x, y):
        return self.b.add(arith.MuliOp(self.c(x), self.c(y)))

    def div(self, x, y):
        return self.b.add(arith.DivUIOp(self.c(x), self.c(y)))

    def rem(self, x, y):
        return self.b.add(arith.RemUIOp(self.c(x), self.c(y)))

    def min(self, x, y):
        return self.b.add(arith.MinUIOp(self.c(x), self.c(y)))

    def xor(self, x, y):
        return self.b.add(arith.XOrIOp(self.c(x), self.c(y)))

    def lt(self, x, y):
        return self.b.cmpi("ult", self.c(x), self.c(y))


def swizzled(ix: Index, row, col, row_length: int) -> SSAValue:
    """The element (row, col) of a shared tile with rows of `row_length` elements (module doc)."""
    rows_per_line = max(1, 64 // row_length)
    chunks = row_length // 8
    group = chunks & -chunks  # the xor stays inside the row: a power of two that divides its chunks
    chunk = ix.xor(ix.div(col, 8), ix.rem(ix.div(row, rows_per_line), group))
    return ix.add(ix.add(ix.mul(row, row_length), ix.mul(chunk, 8)), ix.rem(col, 8))


def _read(b: KernelBuilder, operand: SSAValue, m: IndexingMap, point: list[SSAValue]) -> SSAValue:
    indices = list(b.insert(ApplyIndexingOp(m, point)).results)
    return b.add(tensor.ExtractOp(operand, indices, operand.type.element_type))


def stage(b: KernelBuilder, op: MatmulOp, tile: SSAValue, which: int, first: SSAValue, k0: SSAValue, rows: int,
          kc: int, t: SSAValue, threads: int,
          position: Callable[[Index, SSAValue, SSAValue], SSAValue] | None = None) -> SSAValue:
    """Copy operand `which` (0: A rows m, 1: B columns n) of the K block at k0 into `tile`: element e =
    t + threads·j is (row e / kc, k e % kc), zero outside the problem, stored at `position(row, k)`
    (by default `swizzled`, for ldmatrix)."""
    _, m_total, n_total, k_total = op.problem_sizes
    extent = m_total if which == 0 else n_total
    operand, m = (op.lhs, op.maps[0]) if which == 0 else (op.rhs, op.maps[1])
    zero_point = b.index(0)
    count = rows * kc

    def copy(ib: KernelBuilder, j: SSAValue, args: list[SSAValue]) -> list[SSAValue]:
        ix = Index(ib)
        e = ix.add(t, ix.mul(j, threads))

        def write(wb: KernelBuilder) -> list[SSAValue]:
            wx = Index(wb)
            r, c = wx.div(e, kc), wx.rem(e, kc)
            row, k = wx.add(first, r), wx.add(k0, c)
            inside = wb.and_([wx.lt(row, extent), wx.lt(k, k_total)])
            row_c, k_c = wx.min(row, max(extent, 1) - 1), wx.min(k, max(k_total, 1) - 1)
            point = [op.offsets[0], row_c, zero_point, k_c] if which == 0 else [op.offsets[0], zero_point, row_c, k_c]
            value = wb.select(inside, _read(wb, operand, m, point), wb.constant(0.0, operand.type.element_type))
            where = position(wx, r, c) if position is not None else swizzled(wx, r, c, kc)
            return [wb.add(tensor.InsertOp(value, args[0], [where]))]

        # The last round of a tile that the threads do not divide: threads past it copy nothing.
        return if_then(ib, ix.lt(e, count) if count % threads else None, write, [args[0]])

    return for_loop(b, 0, -(-count // threads), [tile], copy, "stage")[0]


@dataclass(frozen=True)
class WarpBlock:
    """A block of a matmul with a warp layout: its shape, and each thread's place in it as IR
    values (its lane, its warp's row and column in the warp grid)."""

    tm: int
    tn: int
    mc: int
    nc: int
    kc: int
    threads: int
    problem: tuple[int, ...]  # (B, M, N, K)
    element: str
    thread: SSAValue
    lane: SSAValue
    w_row: SSAValue
    w_col: SSAValue

    @property
    def fragments(self) -> tuple[int, int]:
        """(A fragments, B fragments) of a warp tile: m16 rows and n8 columns of mma tiles."""
        return self.tm // MMA_TILE[0], self.tn // MMA_TILE[1]


def warp_block(op: MatmulOp, b: KernelBuilder) -> WarpBlock:
    wm, wn = op.warp_grid.get_values()
    tm, tn = op.warp_tile.get_values()
    ix = Index(b)
    t = thread_id(op)
    warp, lane = ix.div(t, WARP), ix.rem(t, WARP)
    return WarpBlock(tm, tn, wm * tm, wn * tn, staged_k(op), WARP * wm * wn, tuple(op.problem_sizes),
                     str(op.lhs.type.element_type), t, lane, ix.div(warp, wn), ix.rem(warp, wn))


def load_fragments(lb: KernelBuilder, blk: WarpBlock, a_tile: SSAValue, b_tile: SSAValue,
                   a_index: Callable[[int], SSAValue], b_index: Callable[[int], SSAValue],
                   b_trans: bool = False) -> list[SSAValue]:
    """The operands of one k step of 16: an ldmatrix.x4 per A fragment p at the lane's row
    a_index(p), then an ldmatrix.x2 per B fragment q at b_index(q)."""
    fm, fn = blk.fragments
    return ([lb.add(LdMatrixOp(a_tile, a_index(p), 4)) for p in range(fm)]
            + [lb.add(LdMatrixOp(b_tile, b_index(q), 2, trans=b_trans)) for q in range(fn)])


def mma_fragments(lb: KernelBuilder, blk: WarpBlock, accs: list[SSAValue], fragments: list[SSAValue]) -> list[SSAValue]:
    """An mma.sync per (A fragment p, B fragment q) of a k step's `load_fragments`."""
    fm, fn = blk.fragments
    a_frags, b_frags = fragments[:fm], fragments[fm:]
    return [lb.add(MmaSyncOp(a_frags[p], b_frags[q], accs[p * fn + q], blk.element))
            for p in range(fm) for q in range(fn)]


def mma_k_step(lb: KernelBuilder, blk: WarpBlock, accs: list[SSAValue], a_tile: SSAValue, b_tile: SSAValue,
               a_index: Callable[[int], SSAValue], b_index: Callable[[int], SSAValue],
               b_trans: bool = False) -> list[SSAValue]:
    """One k step of 16: its fragments loaded, then multiplied."""
    return mma_fragments(lb, blk, accs, load_fragments(lb, blk, a_tile, b_tile, a_index, b_index, b_trans))


def lower_mma(op: MatmulOp) -> None:
    """Lower `op` (tiled, parallelized, with a warp layout) as the module doc says."""
    b = KernelBuilder(InsertPoint.before(op))
    blk = warp_block(op, b)
    fm, fn = blk.fragments
    kc = blk.kc
    ix = Index(b)
    _, m0, n0 = op.offsets
    elem_t = op.lhs.type.element_type
    a_tile = b.add(AllocateSharedOp(TensorType(elem_t, [blk.mc * kc])))
    b_tile = b.add(AllocateSharedOp(TensorType(elem_t, [blk.nc * kc])))
    zero = b.constant(0.0, F32X4)
    a_base = ix.add(ix.mul(blk.w_row, blk.tm), ix.rem(blk.lane, 16))  # ldmatrix.x4 row of lane, k chunk 8·(lane/16)
    a_chunk = ix.mul(ix.div(blk.lane, 16), 8)
    b_base = ix.add(ix.mul(blk.w_col, blk.tn), ix.rem(blk.lane, 8))  # ldmatrix.x2: column, k chunk 8·(lane/8 % 2)
    b_chunk = ix.mul(ix.rem(ix.div(blk.lane, 8), 2), 8)

    def k_block(lb: KernelBuilder, kt: SSAValue, args: list[SSAValue]) -> list[SSAValue]:
        lx = Index(lb)
        accs, a_s, b_s = list(args[:-2]), args[-2], args[-1]
        k0 = lx.mul(kt, kc)
        a_s = stage(lb, op, a_s, 0, m0, k0, blk.mc, kc, blk.thread, blk.threads)
        b_s = stage(lb, op, b_s, 1, n0, k0, blk.nc, kc, blk.thread, blk.threads)
        a_s, b_s = lb.insert(SyncThreadsOp([a_s, b_s])).results
        for ks in range(kc // MMA_TILE[2]):
            accs = mma_k_step(lb, blk, accs, a_s, b_s,
                              lambda p, ks=ks: swizzled(lx, lx.add(a_base, 16 * p), lx.add(a_chunk, 16 * ks), kc),
                              lambda q, ks=ks: swizzled(lx, lx.add(b_base, 8 * q), lx.add(b_chunk, 16 * ks), kc))
        a_s, b_s = lb.insert(SyncThreadsOp([a_s, b_s])).results
        return [*accs, a_s, b_s]

    k_blocks = -(-blk.problem[3] // kc)
    results = for_loop(b, 0, k_blocks, [zero] * (fm * fn) + [a_tile, b_tile], k_block, "kt")
    finish(op, b, blk, results[:fm * fn])


def finish(op: MatmulOp, b: KernelBuilder, blk: WarpBlock, accs: list[SSAValue]) -> None:
    """The epilogue of every accumulator element inside the problem, stored at out_map (module
    doc); the op replaced by the result."""
    ix = Index(b)
    _, m0, n0 = op.offsets
    fm, fn = blk.fragments
    row0 = ix.add(ix.add(m0, ix.mul(blk.w_row, blk.tm)), ix.div(blk.lane, 4))
    col0 = ix.add(ix.add(n0, ix.mul(blk.w_col, blk.tn)), ix.mul(ix.rem(blk.lane, 4), 2))
    out = op.init
    for p in range(fm):
        for q in range(fn):
            for i in range(4):
                row = ix.add(row0, 16 * p + 8 * (i // 2))
                col = ix.add(col0, 8 * q + i % 2)
                out = store_element(op, b, out, b.add(vector.ExtractOp(accs[p * fn + q], [i], Float32Type())), row, col)
    op.result.replace_all_uses_with(out)
    Rewriter.erase_op(op)


def store_element(op: MatmulOp, b: KernelBuilder, out: SSAValue, acc: SSAValue, row: SSAValue,
                  col: SSAValue) -> SSAValue:
    """`out` with the epilogue of accumulator `acc` stored at (row, col) by out_map, when that is
    inside the problem."""
    bi = op.offsets[0]
    _, m_total, n_total, _ = op.problem_sizes
    ix = Index(b)

    def store(sb: KernelBuilder) -> list[SSAValue]:
        value = clone_block_body(op.epilogue.block, [acc, bi, row, col], sb.insertion_point)[0]
        indices = list(sb.insert(ApplyIndexingOp(op.maps[2], [bi, row, col, sb.index(0)])).results)
        return [sb.add(tensor.InsertOp(value, out, indices))]

    return if_then(b, b.and_([ix.lt(row, m_total), ix.lt(col, n_total)]), store, [out])[0]


__all__ = ["F32X4", "Index", "WarpBlock", "finish", "load_fragments", "lower_mma", "mma_fragments", "mma_k_step",
           "stage", "store_element", "swizzled", "thread_id", "warp_block"]
