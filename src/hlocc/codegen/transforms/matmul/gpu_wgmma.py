"""The sm_90a lowering of a tiled `xla.matmul` with `wgmma` (set by `transform.hlocc.use_wgmma`; issue 17
item 4): bf16/f16 operands, f32 accumulators, `wgmma.mma_async.m64nNk16` reading both operands from
shared memory through matrix descriptors (codegen/ir/warpgroup_ops.py).

One GPU block computes one MC x NC block tile (MC = 64G, N = NC) of batch b at (m0, n0) with G
warpgroups (4G warps, 128G threads); warpgroup g owns rows 64g .. 64g + 63 and all NC columns:

    accumulator: vector<NC/2 x f32> per thread (the m64nNk16 D fragment), zero
    scf.for kt over ceil(K / KC) K blocks                       (fissioned by the block simulation)
      stage A[m0 : m0+MC, kt·KC : +KC] and B[.., n0 : n0+NC] (both K-major) into shared memory in
        the 128-byte-swizzle canonical layout (below), each thread copying elements t, t +
        threads, ...; an element past M, N or K is zero (its read clamped into the operand)
      fence.proxy.async (the ordinary stores become visible to wgmma's async proxy); barrier
      wgmma.fence; per k step of 16: wgmma.mma_async(desc A of warpgroup g, desc B) ; commit;
      wait_group 0 (the accumulator is readable; the tiles are free to overwrite); barrier
    epilogue: register i of thread t (warp w = t/32 % 4 of warpgroup g, lane l) is row
      m0 + 64g + 16w + l/4 + 8((i/2) % 2), column n0 + 8(i/4) + 2(l % 4) + i % 2; inside the problem
      it is computed by the op's epilogue and stored at out_map

KC is the schedule's K block rounded up to 64 (one 128-byte row of 16-bit elements). A tile of R
rows (R = MC or NC, a multiple of 8) is KC/64 *atoms* of R rows x 128 bytes, one after the other;
in an atom, element (r, c) is at byte (r/8)·1024 + (r%8)·128 + ((c/8) xor (r%8))·16 + (c%8)·2: the
canonical K-major layout with 128-byte swizzle (PTX ISA, "Shared Memory Matrix Layout"; CUTLASS's
Layout_K_SW128_Atom, Swizzle<3,4,3>), core matrices of 8 rows x 16 bytes, SBO 1024 bytes between
8-row groups, LBO unused (1). The swizzle is of the shared address itself, so each tile starts
1024-byte aligned (the PTX translation aligns a wgmma kernel's shared buffers so; the block
simulation places every buffer so) and the descriptors have base offset 0. The k step ks of an atom
starts 32·(ks % 4) bytes into its first row (the hardware applies the swizzle to the advanced
address, as CUTLASS's and Triton's k iteration do); A's descriptor for warpgroup g starts at row 64g.

*Differs from XLA/Triton*, whose Hopper GEMMs load the tiles with TMA into a multi-stage ring
guarded by mbarriers and keep wgmma groups in flight across K blocks (wait_group 1): here the tiles
are staged synchronously and each K block waits for its wgmmas (wait_group 0), the simplest correct
pipeline, checked exactly by the SIMT simulation. With `tma_stages` (transform.hlocc.use_tma) the
tiles come by TMA through an mbarrier ring instead: gpu_wgmma_tma.py. Never the default schedule:
it has not run on hardware.
"""

from __future__ import annotations

from xdsl.dialects import vector
from xdsl.dialects.builtin import Float32Type, TensorType
from xdsl.ir import SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from hlocc.codegen.ir import (
    AllocateSharedOp,
    FenceProxyAsyncOp,
    SyncThreadsOp,
    WgmmaCommitGroupOp,
    WgmmaDescriptorOp,
    WgmmaFenceOp,
    WgmmaMmaAsyncOp,
    WgmmaWaitGroupOp,
)
from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.ir.matmul_ops import MatmulOp
from hlocc.codegen.ir.warpgroup_ops import WARPGROUP, accumulator_type
from hlocc.codegen.schedule.use_wgmma import SWIZZLE_ROW, WGMMA_M, wgmma_k
from hlocc.codegen.transforms.matmul.gpu_mma import Index, stage, store_element, warp_block
from hlocc.codegen.transforms.util import for_loop

SWIZZLE_BYTES = 128
GROUP_BYTES = 1024  # SBO: 8 rows of 128 bytes
K_STEP = 16


def canonical_sw128(ix: Index, row: SSAValue, col: SSAValue, rows: int) -> SSAValue:
    """The element index of (row, k = col) in a tile of `rows` rows in the 128-byte-swizzle K-major
    layout (module doc), 16-bit elements."""
    per_row = SWIZZLE_ROW  # 64 elements = 128 bytes
    atom = ix.div(col, per_row)
    within = ix.rem(col, per_row)
    line = ix.rem(row, 8)
    chunk = ix.xor(ix.div(within, 8), line)
    group = ix.add(ix.mul(ix.div(row, 8), GROUP_BYTES // 2), ix.mul(line, per_row))
    start = ix.add(ix.mul(atom, rows * per_row), group)
    return ix.add(start, ix.add(ix.mul(chunk, 8), ix.rem(within, 8)))


def k_step_start(rows: int, ks: int) -> int:
    """The element index, unswizzled, where k step ks of a tile of `rows` rows starts (row 0)."""
    k = K_STEP * ks
    return (k // SWIZZLE_ROW) * rows * SWIZZLE_ROW + k % SWIZZLE_ROW


def lower_wgmma(op: MatmulOp) -> None:
    """Lower `op` (tiled, parallelized, with a warpgroup layout and `wgmma`) as the module doc says."""
    b = KernelBuilder(InsertPoint.before(op))
    blk = warp_block(op, b)
    mc, nc, threads, t = blk.mc, blk.nc, blk.threads, blk.thread
    kc = wgmma_k(op)
    ix = Index(b)
    _, m0, n0 = op.offsets
    elem_t = op.lhs.type.element_type
    a_tile = b.add(AllocateSharedOp(TensorType(elem_t, [mc * kc])))
    b_tile = b.add(AllocateSharedOp(TensorType(elem_t, [nc * kc])))
    group = ix.div(t, WARPGROUP)
    a_rows = ix.mul(group, (WGMMA_M // 8) * (GROUP_BYTES // 2))  # warpgroup g's rows 64g..: 8 groups of 8 rows

    def k_block(lb: KernelBuilder, kt: SSAValue, args: list[SSAValue]) -> list[SSAValue]:
        lx = Index(lb)
        acc, a_s, b_s = args
        k0 = lx.mul(kt, kc)
        a_s = stage(lb, op, a_s, 0, m0, k0, mc, kc, t, threads, lambda wx, r, c: canonical_sw128(wx, r, c, mc))
        b_s = stage(lb, op, b_s, 1, n0, k0, nc, kc, t, threads, lambda wx, r, c: canonical_sw128(wx, r, c, nc))
        lb.insert(FenceProxyAsyncOp())
        a_s, b_s = lb.insert(SyncThreadsOp([a_s, b_s])).results
        lb.insert(WgmmaFenceOp())
        for ks in range(kc // K_STEP):
            a_desc = lb.add(WgmmaDescriptorOp(a_s, lx.add(a_rows, k_step_start(mc, ks)), SWIZZLE_BYTES, 16,
                                              GROUP_BYTES))
            b_desc = lb.add(WgmmaDescriptorOp(b_s, lb.index(k_step_start(nc, ks)), SWIZZLE_BYTES, 16, GROUP_BYTES))
            acc = lb.add(WgmmaMmaAsyncOp(a_desc, b_desc, acc, nc, blk.element))
        lb.insert(WgmmaCommitGroupOp())
        (acc,) = lb.insert(WgmmaWaitGroupOp([acc], 0)).results
        a_s, b_s = lb.insert(SyncThreadsOp([a_s, b_s])).results
        return [acc, a_s, b_s]

    k_blocks = -(-blk.problem[3] // kc)
    acc = for_loop(b, 0, k_blocks, [b.constant(0.0, accumulator_type(nc)), a_tile, b_tile], k_block, "kt")[0]
    store_accumulator(op, b, blk, acc)


def store_accumulator(op: MatmulOp, b: KernelBuilder, blk, acc: SSAValue) -> None:
    """The epilogue of each register of the m64nNk16 accumulator `acc` inside the problem, stored at
    out_map (module doc); the op replaced by the result."""
    ix = Index(b)
    _, m0, n0 = op.offsets
    t, nc = blk.thread, blk.nc
    group = ix.div(t, WARPGROUP)
    warp = ix.rem(ix.div(t, 32), 4)
    row0 = ix.add(ix.add(m0, ix.mul(group, WGMMA_M)), ix.add(ix.mul(warp, 16), ix.div(blk.lane, 4)))
    col0 = ix.add(n0, ix.mul(ix.rem(blk.lane, 4), 2))
    out = op.init
    for i in range(nc // 2):
        row = ix.add(row0, 8 * ((i // 2) % 2))
        col = ix.add(col0, 8 * (i // 4) + i % 2)
        out = store_element(op, b, out, b.add(vector.ExtractOp(acc, [i], Float32Type())), row, col)
    op.result.replace_all_uses_with(out)
    Rewriter.erase_op(op)


__all__ = ["canonical_sw128", "k_step_start", "lower_wgmma", "store_accumulator"]
