"""The cp.async ring of the GPU matmul (`stages` = S, set by `transform.hlocc.pipeline_shared_copies`;
issue 17 item 4): gpu_mma.py's lowering with its operand tiles staged by 16-byte `xla.cp_async`
copies into S shared buffers, S - 1 K blocks in flight while one is consumed:

    prologue: for s < S - 1: start the copies of K block s into buffer s; commit
              wait until block 0 has landed; barrier; ldmatrix the fragments of its first k step
    scf.for kt over the K blocks (the fragments of the current k step carried in registers)
      for each k step ks of 16 in the K block:
        ks = 0: start the copies of K block kt + S - 1 into buffer (kt + S - 1) mod S (none past
                the last); commit (that buffer, block kt - 1's, was last read before the barrier)
        last ks: wait until at most S - 2 groups are in flight (block kt + 1 has landed for this
                thread); barrier (for every thread)
        ldmatrix the next k step's fragments (of block kt, or after the last of block kt + 1)
        mma.sync on the current ones
    wait for all

The next step's ldmatrix is issued before the current step's mma.sync (CUTLASS's multistage
mainloop does the same): its shared-memory latency overlaps the tensor cores' work, also across
a K block's barrier, where the warps of a block otherwise all waited for their first fragments.

Each copy moves 8 contiguous elements: A's tile is staged m-major (rows of K) from an A contiguous
in k; B's n-major from a B contiguous in k (plain ldmatrix, as gpu_mma.py) or k-major (rows of n,
NC long) from a B contiguous in n, read with `ldmatrix .trans`. A chunk past the problem's edge
copies zeros (cp.async's src_size 0; its address clamped inside the operand), which needs the
contiguous extent to be a multiple of 8 (chunks are all in or all out, and rows 16-byte aligned):
`copy_layouts` says whether the operands allow all this, else the synchronous staging is used.

In the SIMT simulation a cp_async copies at once and the waits do nothing: exact for a kernel that
waits and synchronizes before it reads, and blind to a wait missing there (ptxas does not check
that either); the ring's indexing, stages and edges are what the simulation checks.
"""

from __future__ import annotations

from xdsl.dialects.builtin import TensorType
from xdsl.ir import SSAValue
from xdsl.rewriter import InsertPoint

from hlocc.analysis.affine_expr import dim, variables
from hlocc.analysis.indexing_map import IndexingMap
from hlocc.codegen.ir import (
    AllocateSharedOp,
    ApplyIndexingOp,
    CpAsyncCommitOp,
    CpAsyncOp,
    CpAsyncWaitOp,
    SyncThreadsOp,
)
from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.ir.matmul_ops import MatmulOp
from hlocc.codegen.ir.mlir_types import tensor_sizes
from hlocc.codegen.schedule.set_operand_layout import MMA_TILE
from hlocc.codegen.transforms.flatten_tensors import emit_linear_index
from hlocc.codegen.transforms.matmul.gpu_mma import (
    F32X4,
    Index,
    finish,
    load_fragments,
    lower_mma,
    mma_fragments,
    swizzled,
    warp_block,
)
from hlocc.codegen.transforms.matmul.gpu_wgmma import lower_wgmma
from hlocc.codegen.transforms.matmul.gpu_wgmma_tma import lower_wgmma_tma
from hlocc.codegen.transforms.util import for_loop, if_then

CHUNK = 8
"""Elements of 16 bits per cp.async (16 bytes)."""

B_DIM, M_DIM, N_DIM, K_DIM = range(4)


def contiguous_dim(m: IndexingMap, t: TensorType) -> int | None:
    """The (b, m, n, k) dimension along which `t`'s elements are consecutive in memory: the minor
    physical index is exactly that dimension and no other index uses it; None when there is none or
    the minor extent is not a multiple of 8 (16-byte chunks would straddle rows or lose alignment)."""
    shape = t.get_shape()
    if not shape or shape[-1] % CHUNK:
        return None
    for d in range(4):
        if m.results[-1] == dim(d) and not any(dim(d) in variables(r) for r in m.results[:-1]):
            return d
    return None


def copy_layouts(op: MatmulOp) -> tuple[bool] | None:
    """(B staged k-major?) when both operands allow 16-byte copies (module doc), else None."""
    lhs_map, rhs_map, _ = op.maps
    if contiguous_dim(lhs_map, op.lhs.type) != K_DIM:
        return None
    rhs = contiguous_dim(rhs_map, op.rhs.type)
    if rhs not in (K_DIM, N_DIM):
        return None
    return (rhs == N_DIM,)


def lower_mma_pipelined(op: MatmulOp, b_k_major: bool) -> None:
    stages = op.stages.value.data
    b = KernelBuilder(InsertPoint.before(op))
    blk = warp_block(op, b)
    fm, fn = blk.fragments
    mc, nc, kc, threads, t, lane = blk.mc, blk.nc, blk.kc, blk.threads, blk.thread, blk.lane
    _, m_total, n_total, k_total = blk.problem
    k_blocks = -(-k_total // kc)
    ix = Index(b)
    bi, m0, n0 = op.offsets
    elem_t = op.lhs.type.element_type
    a_size, b_size = mc * kc, nc * kc
    a_ring = b.add(AllocateSharedOp(TensorType(elem_t, [stages * a_size])))
    b_ring = b.add(AllocateSharedOp(TensorType(elem_t, [stages * b_size])))
    zero = b.constant(0.0, F32X4)
    lhs_map, rhs_map, _ = op.maps
    lhs_shape, rhs_shape = tensor_sizes(op.lhs.type), tensor_sizes(op.rhs.type)

    def source(sb: KernelBuilder, operand: SSAValue, m: IndexingMap, shape, point: list[SSAValue]) -> SSAValue:
        indices = list(sb.insert(ApplyIndexingOp(m, point)).results)
        return emit_linear_index(sb, shape, indices)

    def issue(sb: KernelBuilder, tile: SSAValue, a_r: SSAValue, b_r: SSAValue,
              in_range: SSAValue | None) -> tuple[SSAValue, SSAValue]:
        """Start the copies of K block `tile` into buffer tile mod S."""
        sx = Index(sb)
        stage = sx.rem(tile, stages)
        k0 = sx.mul(tile, kc)
        zero_i = sb.index(0)

        def copies(count: int, body, ring: SSAValue) -> SSAValue:
            def each(lb: KernelBuilder, j: SSAValue, args: list[SSAValue]) -> list[SSAValue]:
                lx = Index(lb)
                e = lx.add(t, lx.mul(j, threads))
                return if_then(lb, lx.lt(e, count) if count % threads else None,
                               lambda wb: [body(wb, Index(wb), e, args[0])], [args[0]])
            return for_loop(sb, 0, -(-count // threads), [ring], each, "copy")[0]

        def checks(wb: KernelBuilder, conds: list[SSAValue]) -> SSAValue:
            return wb.and_(conds + ([in_range] if in_range is not None else []))

        def a_copy(wb: KernelBuilder, wx: Index, e: SSAValue, ring: SSAValue) -> SSAValue:
            per_row = kc // CHUNK
            r, c = wx.div(e, per_row), wx.mul(wx.rem(e, per_row), CHUNK)
            row, k = wx.add(m0, r), wx.add(k0, c)
            valid = checks(wb, [wx.lt(row, m_total), wx.lt(k, k_total)])
            point = [bi, wx.min(row, m_total - 1), zero_i, wx.min(k, k_total - CHUNK)]
            dst = wx.add(wx.mul(stage, a_size), swizzled(wx, r, c, kc))
            return wb.add(CpAsyncOp(ring, dst, op.lhs, source(wb, op.lhs, lhs_map, lhs_shape, point), valid))

        def b_copy(wb: KernelBuilder, wx: Index, e: SSAValue, ring: SSAValue) -> SSAValue:
            if b_k_major:  # rows of k, NC long: chunk (k, n..n+7)
                per_row = nc // CHUNK
                r, c = wx.div(e, per_row), wx.mul(wx.rem(e, per_row), CHUNK)
                k, col = wx.add(k0, r), wx.add(n0, c)
                valid = checks(wb, [wx.lt(col, n_total), wx.lt(k, k_total)])
                point = [bi, zero_i, wx.min(col, n_total - CHUNK), wx.min(k, k_total - 1)]
                dst = wx.add(wx.mul(stage, b_size), swizzled(wx, r, c, nc))
            else:  # rows of n, KC long: chunk (n, k..k+7)
                per_row = kc // CHUNK
                r, c = wx.div(e, per_row), wx.mul(wx.rem(e, per_row), CHUNK)
                col, k = wx.add(n0, r), wx.add(k0, c)
                valid = checks(wb, [wx.lt(col, n_total), wx.lt(k, k_total)])
                point = [bi, zero_i, wx.min(col, n_total - 1), wx.min(k, k_total - CHUNK)]
                dst = wx.add(wx.mul(stage, b_size), swizzled(wx, r, c, kc))
            return wb.add(CpAsyncOp(ring, dst, op.rhs, source(wb, op.rhs, rhs_map, rhs_shape, point), valid))

        a_r = copies(a_size // CHUNK, a_copy, a_r)
        b_r = copies(b_size // CHUNK, b_copy, b_r)
        sb.insert(CpAsyncCommitOp())
        return a_r, b_r

    for s in range(stages - 1):
        if s < k_blocks:
            a_ring, b_ring = issue(b, b.index(s), a_ring, b_ring, None)
        else:
            b.insert(CpAsyncCommitOp())  # empty groups keep the wait counts uniform

    a_base = ix.add(ix.mul(blk.w_row, blk.tm), ix.rem(lane, 16))
    a_chunk = ix.mul(ix.div(lane, 16), 8)
    if b_k_major:  # ldmatrix.x2.trans: lanes 0-15 give rows k 0-15 of the fragment's 8 columns
        b_row, b_col = ix.rem(lane, 16), ix.mul(blk.w_col, blk.tn)
    else:
        b_row, b_col = ix.add(ix.mul(blk.w_col, blk.tn), ix.rem(lane, 8)), ix.mul(ix.rem(ix.div(lane, 8), 2), 8)
    steps = kc // MMA_TILE[2]

    def fragments(lb: KernelBuilder, a_r: SSAValue, b_r: SSAValue, tile: SSAValue, ks: int) -> list[SSAValue]:
        """The fragments of k step `ks` of K block `tile` (in buffer tile mod S)."""
        lx = Index(lb)
        stage = lx.rem(tile, stages)
        a_off, b_off = lx.mul(stage, a_size), lx.mul(stage, b_size)

        def a_index(p: int) -> SSAValue:
            return lx.add(a_off, swizzled(lx, lx.add(a_base, 16 * p), lx.add(a_chunk, 16 * ks), kc))

        def b_index(q: int) -> SSAValue:
            if b_k_major:
                return lx.add(b_off, swizzled(lx, lx.add(b_row, 16 * ks), lx.add(b_col, 8 * q), nc))
            return lx.add(b_off, swizzled(lx, lx.add(b_row, 8 * q), lx.add(b_col, 16 * ks), kc))

        return load_fragments(lb, blk, a_r, b_r, a_index, b_index, b_trans=b_k_major)

    # K block 0 landed for every thread, and its first k step's fragments in registers
    a_ring, b_ring = b.insert(CpAsyncWaitOp([a_ring, b_ring], stages - 2)).results
    a_ring, b_ring = b.insert(SyncThreadsOp([a_ring, b_ring])).results
    first = fragments(b, a_ring, b_ring, b.index(0), 0)
    count = len(first)

    def k_block(lb: KernelBuilder, kt: SSAValue, args: list[SSAValue]) -> list[SSAValue]:
        lx = Index(lb)
        accs, frags, (a_r, b_r) = list(args[:fm * fn]), list(args[fm * fn:fm * fn + count]), args[-2:]
        for ks in range(steps):
            if ks == 0:  # buffer (kt - 1) mod S was last read before the previous barrier
                ahead = lx.add(kt, stages - 1)
                a_r, b_r = issue(lb, ahead, a_r, b_r, lx.lt(ahead, k_blocks))
            if ks == steps - 1:  # K block kt + 1 landed for every thread
                a_r, b_r = lb.insert(CpAsyncWaitOp([a_r, b_r], stages - 2)).results
                a_r, b_r = lb.insert(SyncThreadsOp([a_r, b_r])).results
                following = fragments(lb, a_r, b_r, lx.add(kt, 1), 0)
            else:
                following = fragments(lb, a_r, b_r, kt, ks + 1)
            accs = mma_fragments(lb, blk, accs, frags)
            frags = following
        return [*accs, *frags, a_r, b_r]

    results = for_loop(b, 0, k_blocks, [zero] * (fm * fn) + first + [a_ring, b_ring], k_block, "kt")
    b.insert(CpAsyncWaitOp(results[-2:], 0))
    finish(op, b, blk, results[:fm * fn])


def lower_gpu_matmul(op: MatmulOp) -> None:
    """A matmul with a warp layout: with wgmma where `use_wgmma` asked for it (gpu_wgmma.py; its tiles
    by TMA where `use_tma` asked too: gpu_wgmma_tma.py); with
    the cp.async ring where it has stages and its operands allow 16-byte copies, else with the
    synchronous staging (gpu_mma.py)."""
    if op.wgmma is not None:
        (lower_wgmma_tma if op.tma_stages is not None else lower_wgmma)(op)
        return
    layouts = copy_layouts(op) if op.stages is not None and op.size_list[3] > 0 else None
    if layouts is not None:
        lower_mma_pipelined(op, *layouts)
    else:
        lower_mma(op)


__all__ = ["contiguous_dim", "copy_layouts", "lower_gpu_matmul", "lower_mma_pipelined"]
