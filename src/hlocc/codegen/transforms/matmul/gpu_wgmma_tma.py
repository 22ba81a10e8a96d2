"""The sm_90a lowering of a wgmma matmul whose tiles come by TMA (`tma_stages` = S, set by
`transform.hlocc.use_tma`; issue 17 item 4): a ring of S shared-memory stages of the A (MC x KC)
and B (NC x KC) tiles, each with a *full* and an *empty* mbarrier (codegen/ir/tma_ops.py), one
producer thread and every thread a consumer:

    prologue: thread 0 inits full[s] (1 arrival: its expect_tx) and empty[s] (all the block's
      threads) for every stage; fence.proxy.async; barrier; thread 0 produces K blocks 0 .. S-2
    scf.for kt over ceil(K / KC) K blocks                       (fissioned by the block simulation)
      thread 0 produces block kt + S - 1 (when there is one)
      wait full[kt % S] for parity (kt / S) & 1: the stage's tiles have landed
      wgmma.fence; per k step of 16 a descriptor of each tile in the stage and wgmma.mma_async;
      commit; wait_group 0; arrive on empty[kt % S] (this thread is done with the stage)
    epilogue: gpu_wgmma.py's, register i of thread t at its row and column
    produce block j into stage s = j % S: wait empty[s] for parity ((j / S) & 1) ^ 1 (the previous
      use of the stage released; on a fresh barrier parity 1 has completed), arrive.expect_tx on
      full[s] with the stage's bytes (MC + NC)·KC·2, then the TMA loads of the A and B boxes at
      (block's rows, k0 = j·KC, batch) signalling full[s]

Each operand's tensor map describes it as stored (codegen/ir/tma_ops.py's TensorMapSpec: its
dimensions innermost first, each one of b, m or n, k; 128-byte swizzle, boxes of 64 elements along
the contiguous dimension). An operand contiguous in k is loaded *K-major*, KC/64 boxes of (64 k x
rows), box j at j·rows·128 bytes: the canonical K-major 128-byte-swizzle layout of gpu_wgmma.py
(SBO 1024, k step ks at 32·(ks % 4) bytes into atom ks / 4). One contiguous in m or n is loaded
*MN-major*, rows/64 boxes of (64 m/n x KC k), box j at j·KC·128 bytes: the canonical MN-major
layout (CUTLASS's ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO))), LBO = KC·128 between the boxes, SBO = 1024
between groups of 8 k, k step ks at ks·16·128 bytes, read with wgmma's imm-trans 1. Elements past
M, N or K are outside the tensor, which TMA fills with zeros, so edges need no other mask. An
operand TMA cannot address (a dimension that is not one of b, m/n, k; a row stride not a multiple
of 16 bytes, e.g. a contiguous extent not a multiple of 8; K = 0) sends the matmul to gpu_wgmma.py's
synchronous staging.

*Differs from CUTLASS/Triton*: no warp specialization (the producer is thread 0 of the consumers,
which is what lets the block simulation run it in order), one wgmma group waited per K block
(`wait_group 0`), no clusters or multicast. Never the default schedule: it has not run on hardware.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerType, TensorType, i32
from xdsl.ir import SSAValue
from xdsl.rewriter import InsertPoint

from hlocc.analysis.affine_expr import Const, dim
from hlocc.codegen.ir import (
    AllocateSharedOp,
    FenceProxyAsyncOp,
    MbarrierArriveExpectTxOp,
    MbarrierArriveOp,
    MbarrierInitOp,
    MbarrierWaitOp,
    SyncThreadsOp,
    TensorMapOp,
    TmaLoadOp,
    WgmmaCommitGroupOp,
    WgmmaDescriptorOp,
    WgmmaFenceOp,
    WgmmaMmaAsyncOp,
    WgmmaWaitGroupOp,
)
from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.ir.matmul_ops import MatmulOp
from hlocc.codegen.ir.tma_ops import TMA_ELEMENTS, TensorMapSpec
from hlocc.codegen.ir.warpgroup_ops import WARPGROUP, accumulator_type
from hlocc.codegen.schedule.use_wgmma import SWIZZLE_ROW, WGMMA_M, wgmma_k
from hlocc.codegen.transforms.matmul.gpu_mma import Index, warp_block
from hlocc.codegen.transforms.matmul.gpu_wgmma import (
    GROUP_BYTES,
    K_STEP,
    SWIZZLE_BYTES,
    k_step_start,
    lower_wgmma,
    store_accumulator,
)
from hlocc.codegen.transforms.util import for_loop, if_then

B_DIM, M_DIM, N_DIM, K_DIM = range(4)


@dataclass(frozen=True)
class TmaOperand:
    """How the TMA loads an operand: its tensor map, the (b, m, n, k) dimension each map dimension
    is (innermost first), and whether its tile is MN-major (contiguous in m or n)."""

    spec: TensorMapSpec
    roles: tuple[int, ...]
    mn_major: bool


def tma_operand(op: MatmulOp, which: int, rows: int, kc: int) -> TmaOperand | None:
    """Operand `which` (0: A, 1: B) as TMA loads it in `rows` x `kc` tiles, or None where TMA
    cannot address it (module doc)."""
    operand, m = (op.lhs, op.maps[0]) if which == 0 else (op.rhs, op.maps[1])
    t = operand.type
    element = str(t.element_type)
    if not isinstance(t, TensorType) or element not in TMA_ELEMENTS:
        return None
    shape = t.get_shape()
    if any(not isinstance(s, int) or s < 0 for s in shape) or len(m.results) != len(shape):
        return None
    free = M_DIM if which == 0 else N_DIM
    elem = TMA_ELEMENTS[element]
    kept: list[tuple[int, int, int]] = []  # (role, size, byte stride), outermost first
    stride = elem
    strides = []
    for size in reversed(shape):
        strides.append(stride)
        stride *= max(size, 1)
    strides.reverse()
    for result, size, step in zip(m.results, shape, strides):
        role = next((d for d in (B_DIM, free, K_DIM) if result == dim(d)), None)
        if role is None:
            if size == 1 and isinstance(result, Const) and result.value == 0:
                continue
            return None
        kept.append((role, size, step))
    roles = [role for role, _, _ in kept]
    if len(set(roles)) != len(roles) or set(roles) not in ({free, K_DIM}, {B_DIM, free, K_DIM}):
        return None
    kept.reverse()  # innermost first, as a tensor map lists its dimensions
    inner_role, _, inner_stride = kept[0]
    if inner_stride != elem or inner_role == B_DIM:
        return None
    box = tuple(SWIZZLE_ROW if i == 0 else kc if role == K_DIM else rows if role == free else 1
                for i, (role, _, _) in enumerate(kept))
    spec = TensorMapSpec(element, tuple(size for _, size, _ in kept), tuple(s for _, _, s in kept[1:]), box,
                         SWIZZLE_BYTES)
    if spec.problems():
        return None
    return TmaOperand(spec, tuple(role for role, _, _ in kept), inner_role != K_DIM)


def tma_operands(op: MatmulOp) -> tuple[TmaOperand, TmaOperand] | None:
    """Both operands' TMA loads, or None when either cannot be (the synchronous staging then)."""
    blk_m = op.warp_grid.get_values()[0] * op.warp_tile.get_values()[0]
    blk_n = op.warp_tile.get_values()[1]
    kc = wgmma_k(op)
    if op.size_list[3] == 0:
        return None
    a, b = tma_operand(op, 0, blk_m, kc), tma_operand(op, 1, blk_n, kc)
    return (a, b) if a is not None and b is not None else None


def lower_wgmma_tma(op: MatmulOp) -> None:
    """Lower `op` (tiled, parallelized, wgmma with `tma_stages`) as the module doc says, or by
    gpu_wgmma.py's synchronous staging when TMA cannot load its operands."""
    operands = tma_operands(op)
    if operands is None:
        lower_wgmma(op)
        return
    stages = op.tma_stages.value.data
    b = KernelBuilder(InsertPoint.before(op))
    blk = warp_block(op, b)
    mc, nc, threads, t = blk.mc, blk.nc, blk.threads, blk.thread
    kc = wgmma_k(op)
    ix = Index(b)
    bi, m0, n0 = op.offsets
    elem_t = op.lhs.type.element_type
    a_size, b_size = mc * kc, nc * kc
    a_ring = b.add(AllocateSharedOp(TensorType(elem_t, [stages * a_size])))
    b_ring = b.add(AllocateSharedOp(TensorType(elem_t, [stages * b_size])))
    bars = b.add(AllocateSharedOp(TensorType(IntegerType(64), [2 * stages])))
    maps = [b.add(TensorMapOp(source, operand.spec)) for source, operand in zip((op.lhs, op.rhs), operands)]
    k_blocks = -(-blk.problem[3] // kc)
    stage_bytes = (a_size + b_size) * 2
    producer = ix.lt(t, 1)
    group = ix.div(t, WARPGROUP)

    def produce(pb: KernelBuilder, j: SSAValue, a_r: SSAValue, b_r: SSAValue, bs: SSAValue) -> list[SSAValue]:
        """Thread 0: K block j's tiles into stage j % S (module doc)."""
        px = Index(pb)
        s = px.rem(j, stages)
        parity = px.xor(px.rem(px.div(j, stages), 2), 1)
        (bs,) = pb.insert(MbarrierWaitOp(bs, px.add(s, stages), _i32(pb, parity), [bs])).results
        bs = pb.add(MbarrierArriveExpectTxOp(bs, s, stage_bytes))
        k0 = px.mul(j, kc)
        tiles = []
        for tensor_map, operand, ring, first, rows, size in ((maps[0], operands[0], a_r, m0, mc, a_size),
                                                             (maps[1], operands[1], b_r, n0, nc, b_size)):
            base = px.mul(s, size)
            boxes = rows // SWIZZLE_ROW if operand.mn_major else kc // SWIZZLE_ROW
            for box in range(boxes):
                along = px.add(first, box * SWIZZLE_ROW) if operand.mn_major else first
                k = k0 if operand.mn_major else px.add(k0, box * SWIZZLE_ROW)
                coords = [bi if role == B_DIM else k if role == K_DIM else along for role in operand.roles]
                offset = px.add(base, box * (kc if operand.mn_major else rows) * SWIZZLE_ROW)
                ring = pb.add(TmaLoadOp(tensor_map, coords, ring, offset, bs, s))
            tiles.append(ring)
        return [*tiles, bs]

    def init(ib: KernelBuilder) -> list[SSAValue]:
        bs = bars
        for s in range(stages):
            bs = ib.add(MbarrierInitOp(bs, ib.index(s), 1))
            bs = ib.add(MbarrierInitOp(bs, ib.index(stages + s), threads))
        ib.insert(FenceProxyAsyncOp())  # the initialized barriers, visible to the TMA unit's async proxy
        return [bs]

    (bars_v,) = if_then(b, producer, init, [bars])
    a_ring, b_ring, bars_v = b.insert(SyncThreadsOp([a_ring, b_ring, bars_v])).results
    ring = [a_ring, b_ring, bars_v]
    for j in range(min(stages - 1, k_blocks)):
        ring = if_then(b, producer, lambda pb, j=j, r=ring: produce(pb, pb.index(j), *r), ring)

    def k_block(lb: KernelBuilder, kt: SSAValue, args: list[SSAValue]) -> list[SSAValue]:
        lx = Index(lb)
        acc, a_r, b_r, bs = args
        j = lx.add(kt, stages - 1)
        more = lb.and_([lx.lt(t, 1), lx.lt(j, k_blocks)])
        a_r, b_r, bs = if_then(lb, more, lambda pb: produce(pb, j, a_r, b_r, bs), [a_r, b_r, bs])
        s = lx.rem(kt, stages)
        parity = lx.rem(lx.div(kt, stages), 2)
        a_r, b_r = lb.insert(MbarrierWaitOp(bs, s, _i32(lb, parity), [a_r, b_r])).results
        lb.insert(WgmmaFenceOp())
        a_base, b_base = lx.mul(s, a_size), lx.mul(s, b_size)
        for ks in range(kc // K_STEP):
            a_at = lx.add(a_base, _a_offset(lx, operands[0], group, mc, kc, ks))
            a_desc = _descriptor(lb, a_r, a_at, operands[0], kc)
            b_desc = _descriptor(lb, b_r, lx.add(b_base, _step_offset(operands[1], nc, kc, ks)), operands[1], kc)
            acc = lb.add(WgmmaMmaAsyncOp(a_desc, b_desc, acc, nc, blk.element, operands[0].mn_major,
                                         operands[1].mn_major))
        lb.insert(WgmmaCommitGroupOp())
        (acc,) = lb.insert(WgmmaWaitGroupOp([acc], 0)).results
        bs = lb.add(MbarrierArriveOp(bs, lx.add(s, stages)))
        return [acc, a_r, b_r, bs]

    # Rolled: each iteration's phases stay apart in the block simulation, whose threads run in turn and
    # cannot wait for a later one (an unrolled tail's arrivals would share a phase with the next
    # head's producer wait: tma_simulation.py poisons such a wait).
    acc = for_loop(b, 0, k_blocks, [b.constant(0.0, accumulator_type(nc)), *ring], k_block, "kt",
                   keep_rolled=True)[0]
    store_accumulator(op, b, blk, acc)


def _i32(b: KernelBuilder, value: SSAValue) -> SSAValue:
    return b.add(arith.IndexCastOp(value, i32)) if isinstance(value.type, IndexType) else value


def _step_offset(operand: TmaOperand, rows: int, kc: int, ks: int) -> int:
    """The element where k step ks starts in a tile of `rows` rows, row 0 (module doc)."""
    if operand.mn_major:
        return ks * K_STEP * SWIZZLE_ROW  # 16 k rows of 64 elements
    return k_step_start(rows, ks)


def _a_offset(ix: Index, operand: TmaOperand, group: SSAValue, mc: int, kc: int, ks: int) -> SSAValue:
    """Warpgroup g's 64 rows of A at k step ks: row 64g of a K-major tile (8g groups of 8 rows of
    128 bytes), box g of an MN-major one."""
    per_group = kc * SWIZZLE_ROW if operand.mn_major else (WGMMA_M // 8) * (GROUP_BYTES // 2)
    return ix.add(ix.mul(group, per_group), _step_offset(operand, mc, kc, ks))


def _descriptor(b: KernelBuilder, tile: SSAValue, index: SSAValue, operand: TmaOperand, kc: int) -> SSAValue:
    """SBO 1024 either way; LBO unused (16) K-major, the box pitch KC·128 MN-major."""
    lbo = kc * SWIZZLE_BYTES if operand.mn_major else 16
    return b.add(WgmmaDescriptorOp(tile, index, SWIZZLE_BYTES, lbo, GROUP_BYTES))


__all__ = ["TmaOperand", "lower_wgmma_tma", "tma_operand", "tma_operands"]
