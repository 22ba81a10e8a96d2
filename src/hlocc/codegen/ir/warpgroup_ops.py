"""The `xla` dialect's warpgroup matrix ops for sm_90a (issue 17 item 4): Hopper's `wgmma`, with A
and B read from shared memory through 64-bit *matrix descriptors* and D in registers. A warpgroup
is 4 consecutive warps (threads 128g .. 128g + 127) and executes each op together
(`.sync.aligned`), so, like barriers, they must not sit under thread-dependent control flow. On a
GPU they are NVVM intrinsics or inline PTX (codegen/llvm/warpgroup_ops.py, PTX ISA 8.0,
`.target sm_90a`); on the CPU the block simulation runs `wgmma_mma_async` from the documented
descriptor and fragment semantics (codegen/llvm/warpgroup_simulation.py).

    %d = xla.wgmma_descriptor %tile[%i] {swizzle = 128 : i64, lbo = 16 : i64, sbo = 1024 : i64} : tensor<8192xbf16>
    xla.fence_proxy_async
    xla.wgmma_fence
    %acc2 = xla.wgmma_mma_async %da, %db, %acc {n = 128 : i64, element = "bf16"} : vector<64xf32> -> vector<64xf32>
    xla.wgmma_commit_group
    %acc3 = xla.wgmma_wait_group %acc2 {pending = 0 : i64} : vector<64xf32> -> vector<64xf32>

Facts, with their sources (PTX ISA 8.x, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate";
the bit fields also as CUTLASS's `cute/arch/mma_sm90_desc.hpp` GmmaDescriptor and Modular's
WGMMADescriptor page lay them out):

- The matrix descriptor (64 bits): bits 0-13 the start address, (address & 0x3FFFF) >> 4; bits
  16-29 the leading-dimension byte offset >> 4 (LBO); bits 32-45 the stride-dimension byte offset
  >> 4 (SBO); bits 49-51 the matrix base offset (valid for the swizzled modes); bits 62-63 the
  swizzle mode: 0 none ("interleave"), 1 128-byte, 2 64-byte, 3 32-byte. Other bits are unused.
- Operands are K-major (imm-trans-a = imm-trans-b = 0) or, with `trans_a`/`trans_b`, MN-major
  (imm-trans 1: m or n contiguous; the TMA path loads an operand stored so). A is 64 x 16 (m, k),
  B is N x 16 (n, k). MN-major, in a swizzled mode of W bytes (CUTLASS's make_gmma_desc<Major::MN>:
  ((T,W/16,m),(8,k)):((1,T,LBO),(W/16·T,SBO)), T = 8 elements): element (r, k) is at
      start + (r % (W/2))·2 + (r / (W/2))·LBO + (k % 8)·W + (k / 8)·SBO
  then swizzled as below; unswizzled, start + (r % 8)·2 + (r / 8)·SBO + (k % 8)·16 + (k / 8)·LBO.
  K-major: Their shared-memory layout is built of *core matrices* of 8 rows x
  16 bytes (8 elements of 16 bits). CUTLASS's `make_gmma_desc<Major::K>` (cute/atom/
  mma_traits_sm90_gmma.hpp) states the canonical K-major layouts; in bytes, element (r, k) is at
      start + (r % 8)·W + (r / 8)·SBO + (k / 8)·(LBO if no swizzle else 16) + (k % 8)·2
  with W = 16 (no swizzle), 32, 64 or 128 (the swizzle width), and then, for a swizzle of W bytes,
  the 16-byte chunk bits [4, 4 + b) of the address xor-ed with bits [7, 7 + b), b = log2(W / 16)
  (CUTLASS's Swizzle<b, 4, 3>): the 128-byte pattern repeats every 1024 bytes, so a tile with base
  offset 0 starts 1024-byte aligned. The MMA-Sim tests (microsoft/MMA-Sim, tests/nv/cuda/
  mma_sm90.cu) build the unswizzled case with the same formula (LBO 128, SBO 256).
- D (f32, N/2 registers per thread): thread t of the warpgroup, warp w = t / 32, lane l = t % 32,
  register i holds row 16w + l/4 + 8((i/2) % 2), column 8(i/4) + 2(l % 4) + i % 2 (PTX ISA
  Figure "WGMMA .m64nNk16 register fragment layout for accumulator matrix D"; the same as
  CUTLASS's CLayout_64xN and MMA-Sim's row/col formulas for N = 8).
- Asynchrony: `wgmma.fence` before the first mma_async and whenever registers it uses were
  written otherwise; `commit_group` closes a group; `wait_group N` waits until at most N groups are
  pending: the accumulators may be read only after it (here: its results). Shared memory written by
  ordinary stores (the generic proxy) must be made visible to the async proxy by
  `fence.proxy.async` before a barrier that precedes the wgmma.
"""

from __future__ import annotations

from xdsl.dialects.builtin import (
    Float32Type,
    IndexType,
    IntegerAttr,
    StringAttr,
    UnitAttr,
    VectorType,
    i64,
)
from xdsl.ir import SSAValue
from xdsl.irdl import (
    IRDLOperation,
    attr_def,
    irdl_op_definition,
    operand_def,
    opt_attr_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from hlocc.codegen.ir.warp_ops import WaitGroupOp, check_shared_source

WGMMA_ELEMENTS = ("bf16", "f16")
"""The operand types of `wgmma_mma_async` here (both accumulate in f32)."""

SWIZZLE_MODES = {0: 0, 128: 1, 64: 2, 32: 3}
"""Swizzle width in bytes -> the descriptor's 2-bit mode (bits 62-63)."""

WARPGROUP = 128


def accumulator_type(n: int) -> VectorType:
    """An m64nNk16 f32 accumulator: N/2 registers per thread."""
    return VectorType(Float32Type(), [n // 2])


def descriptor_bits(address: int, swizzle: int, lbo: int, sbo: int, base_offset: int = 0) -> int:
    """The 64-bit descriptor of a matrix at shared-memory byte `address` (module doc)."""
    return (((address & 0x3FFFF) >> 4) | ((lbo >> 4) & 0x3FFF) << 16 | ((sbo >> 4) & 0x3FFF) << 32
            | (base_offset & 7) << 49 | SWIZZLE_MODES[swizzle] << 62)


@irdl_op_definition
class WgmmaDescriptorOp(IRDLOperation):
    """The matrix descriptor of the K-major operand whose element (0, 0) is element `index` of
    `source` (a 1-d tensor of 16-bit elements in shared memory; a pointer after `lower-tensors`):
    its shared-memory address, `lbo` and `sbo` in bytes (multiples of 16 below 2^18), `swizzle` in
    bytes (0, 32, 64, 128), base offset 0 (module doc)."""

    name = "xla.wgmma_descriptor"

    source = operand_def()
    index = operand_def(IndexType)
    swizzle = attr_def(IntegerAttr)
    lbo = attr_def(IntegerAttr)
    sbo = attr_def(IntegerAttr)
    result = result_def(i64)
    traits = traits_def(Pure())

    assembly_format = "$source `[` $index `]` attr-dict `:` type($source)"

    def __init__(self, source: SSAValue, index: SSAValue, swizzle: int, lbo: int, sbo: int):
        super().__init__(operands=[source, index], result_types=[i64],
                         attributes={"swizzle": IntegerAttr(swizzle, 64), "lbo": IntegerAttr(lbo, 64),
                                     "sbo": IntegerAttr(sbo, 64)})

    def verify_(self) -> None:
        swizzle = self.swizzle.value.data
        if swizzle not in SWIZZLE_MODES:
            raise VerifyException(f"'{self.name}' swizzle must be 0, 32, 64 or 128 bytes, found {swizzle}")
        for what in ("lbo", "sbo"):
            value = getattr(self, what).value.data
            if value < 0 or value % 16 or value >= 1 << 18:
                raise VerifyException(f"'{self.name}' {what} must be a multiple of 16 bytes in [0, 2^18) (the "
                                      f"descriptor holds it >> 4 in 14 bits), found {value}")
        check_shared_source(self, self.source.type, "describes")


@irdl_op_definition
class FenceProxyAsyncOp(IRDLOperation):
    """Make this thread's ordinary shared-memory writes visible to the async proxy that wgmma reads
    through (`fence.proxy.async.shared::cta`); a barrier after it orders them for every thread."""

    name = "xla.fence_proxy_async"

    assembly_format = "attr-dict"


@irdl_op_definition
class WgmmaFenceOp(IRDLOperation):
    """Order the warpgroup's register and shared-memory accesses before the wgmma_mma_async ops
    after it (`wgmma.fence.sync.aligned`)."""

    name = "xla.wgmma_fence"

    assembly_format = "attr-dict"


@irdl_op_definition
class WgmmaMmaAsyncOp(IRDLOperation):
    """D = A·B + C for one warpgroup: A 64 x 16 and B N x 16 (K-major) from shared memory by their
    descriptors, C and D the N/2 f32 registers of each thread (module doc). The result may be read
    only after a `wgmma_wait_group` that covers it."""

    name = "xla.wgmma_mma_async"

    a_desc = operand_def(i64)
    b_desc = operand_def(i64)
    c = operand_def(VectorType)
    n = attr_def(IntegerAttr)
    element = attr_def(StringAttr)
    trans_a = opt_attr_def(UnitAttr)  # A is MN-major (m contiguous): imm-trans-a 1
    trans_b = opt_attr_def(UnitAttr)  # B is MN-major (n contiguous): imm-trans-b 1
    result = result_def(VectorType)

    assembly_format = "$a_desc `,` $b_desc `,` $c attr-dict `:` type($c) `->` type($result)"

    def __init__(self, a_desc: SSAValue, b_desc: SSAValue, c: SSAValue, n: int, element: str,
                 trans_a: bool = False, trans_b: bool = False):
        attributes = {"n": IntegerAttr(n, 64), "element": StringAttr(element)}
        attributes.update({name: UnitAttr() for name, on in (("trans_a", trans_a), ("trans_b", trans_b)) if on})
        super().__init__(operands=[a_desc, b_desc, c], result_types=[accumulator_type(n)], attributes=attributes)

    def verify_(self) -> None:
        n = self.n.value.data
        if n % 8 or not 8 <= n <= 256:
            raise VerifyException(f"'{self.name}' m64nNk16 needs N a multiple of 8 in [8, 256], found n = {n}")
        if self.element.data not in WGMMA_ELEMENTS:
            raise VerifyException(f"'{self.name}' multiplies bf16 or f16, found element = \"{self.element.data}\"")
        acc = accumulator_type(n)
        if self.c.type != acc or self.result.type != acc:
            raise VerifyException(f"'{self.name}' with n = {n} takes and gives {acc} (N/2 f32 per thread), found "
                                  f"{self.c.type} -> {self.result.type}")


@irdl_op_definition
class WgmmaCommitGroupOp(IRDLOperation):
    """Close the group of this warpgroup's wgmma_mma_async ops since the last commit
    (`wgmma.commit_group.sync.aligned`)."""

    name = "xla.wgmma_commit_group"

    assembly_format = "attr-dict"


@irdl_op_definition
class WgmmaWaitGroupOp(WaitGroupOp):
    """Wait until at most `pending` committed wgmma groups are in flight
    (`wgmma.wait_group.sync.aligned`); returns the accumulators it makes readable."""

    name = "xla.wgmma_wait_group"

    operands_ = var_operand_def(VectorType)
    results_ = var_result_def(VectorType)
    pending = attr_def(IntegerAttr)


WARPGROUP_OPS = (WgmmaDescriptorOp, FenceProxyAsyncOp, WgmmaFenceOp, WgmmaMmaAsyncOp, WgmmaCommitGroupOp,
                 WgmmaWaitGroupOp)

__all__ = ["SWIZZLE_MODES", "WARPGROUP", "WARPGROUP_OPS", "WGMMA_ELEMENTS", "FenceProxyAsyncOp", "WgmmaCommitGroupOp",
           "WgmmaDescriptorOp", "WgmmaFenceOp", "WgmmaMmaAsyncOp", "WgmmaWaitGroupOp", "accumulator_type",
           "descriptor_bits"]
