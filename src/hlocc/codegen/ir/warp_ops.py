"""The `xla` dialect's warp-collective matrix ops (issue 17 item 4): `ldmatrix` and `mma_sync`, the
sm_80 tensor-core instructions, with PTX's per-lane register ownership as their semantics. All 32
lanes of a warp execute each one together (`.sync.aligned`), so, like barriers, they must not sit
under thread-dependent control flow. On a GPU they are the NVVM intrinsics (codegen/llvm/gpu_ops.py);
on the CPU the block simulation runs them lane by lane from the same layouts
(codegen/llvm/warp_simulation.py), so a kernel's fragments are checked exactly without a GPU.

    %a = xla.ldmatrix %shared[%i] {count = 4 : i64} : tensor<8192xbf16> -> vector<4xi32>
    %b = xla.ldmatrix %shared[%i] {count = 2 : i64, trans} : tensor<8192xbf16> -> vector<2xi32>
    %d = xla.mma_sync %a, %b, %c {element = "bf16"} : vector<4xi32>, vector<2xi32>, vector<4xf32> -> vector<4xf32>

`ldmatrix` (PTX `ldmatrix.sync.aligned.m8n8.x{count}[.trans].shared.b16`): `count` 8x8 matrices of
16-bit elements; lane 8j + r gives the address of row r of matrix j (element `i` of `shared`, a
tensor of 16-bit elements in shared memory; a pointer after `lower-tensors`), 16-byte aligned.
Lane t receives in word j the elements (t/4, 2(t%4)) and (t/4, 2(t%4)+1) of matrix j, the first
in the low half; with `trans`, those of the transposed matrix, i.e. rows 2(t%4) and 2(t%4)+1 of
column t/4.

`mma_sync` (PTX `mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}...f32`): D = A·B + C with A
16x16, B 16x8 (k x n), C and D 16x8 f32. With g = lane/4 and q = lane%4, a lane holds
  A: word r (two elements, the lower k in the low half) = row g + 8(r%2), k = 2q + 8(r/2) + {0,1};
  B: word r = k = 2q + 8r + {0,1}, column g;
  C, D: element i = row g + 8(i/2), column 2q + i%2.
An ldmatrix.x4 of a row-major 16x16 A tile (lanes 0-15 at rows 0-15, k 0; lanes 16-31 at k 8)
gives exactly A's fragment; an ldmatrix.x2 of 8 rows of n, k contiguous (lanes 0-7 at k 0, 8-15
at k 8) gives B's.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    Float32Type,
    IndexType,
    IntegerAttr,
    StringAttr,
    TensorType,
    UnitAttr,
    VectorType,
    i1,
    i32,
)
from xdsl.dialects.llvm import LLVMPointerType
from xdsl.ir import SSAValue
from xdsl.irdl import (
    IRDLOperation,
    attr_def,
    irdl_op_definition,
    operand_def,
    opt_attr_def,
    result_def,
    var_operand_def,
    var_result_def,
)
from xdsl.utils.exceptions import VerifyException

MMA_ELEMENTS = ("bf16", "f16")
"""The operand types of `mma_sync` (both accumulate in f32)."""


def _bits(t) -> int | None:
    return t.width.data if hasattr(t, "width") else getattr(t, "bitwidth", None)


def check_shared_source(op: IRDLOperation, t, verb: str) -> None:
    """`t` is shared memory of 16-bit elements: a 1-d tensor, or a pointer after `lower-tensors`."""
    if isinstance(t, TensorType):
        if t.get_num_dims() != 1 or _bits(t.element_type) != 16:
            raise VerifyException(f"'{op.name}' {verb} a 1-d tensor of 16-bit elements (shared memory), found {t}")
    elif not isinstance(t, LLVMPointerType):
        raise VerifyException(f"'{op.name}' {verb} a tensor or a pointer, found {t}")


@irdl_op_definition
class LdMatrixOp(IRDLOperation):
    """8x8 matrices of 16-bit elements from shared memory into the warp's mma fragments (module doc)."""

    name = "xla.ldmatrix"

    source = operand_def()
    index = operand_def(IndexType)
    count = attr_def(IntegerAttr)
    trans = opt_attr_def(UnitAttr)
    result = result_def(VectorType)

    assembly_format = "$source `[` $index `]` attr-dict `:` type($source) `->` type($result)"

    def __init__(self, source: SSAValue, index: SSAValue, count: int, trans: bool = False):
        attributes = {"count": IntegerAttr(count, 64)} | ({"trans": UnitAttr()} if trans else {})
        super().__init__(operands=[source, index], result_types=[VectorType(i32, [count])], attributes=attributes)

    def verify_(self) -> None:
        count = self.count.value.data
        if count not in (1, 2, 4):
            raise VerifyException(f"'{self.name}' loads 1, 2 or 4 matrices, found count = {count}")
        if self.result.type != VectorType(i32, [count]):
            raise VerifyException(f"'{self.name}' with count = {count} gives vector<{count}xi32>, found "
                                  f"{self.result.type}")
        check_shared_source(self, self.source.type, "reads")


@irdl_op_definition
class MmaSyncOp(IRDLOperation):
    """D = A·B + C for one warp's m16n8k16 fragments, bf16 or f16 operands, f32 accumulators (module doc)."""

    name = "xla.mma_sync"

    a = operand_def(VectorType)
    b = operand_def(VectorType)
    c = operand_def(VectorType)
    element = attr_def(StringAttr)
    result = result_def(VectorType)

    assembly_format = ("$a `,` $b `,` $c attr-dict `:` type($a) `,` type($b) `,` type($c) `->` type($result)")

    def __init__(self, a: SSAValue, b: SSAValue, c: SSAValue, element: str):
        super().__init__(operands=[a, b, c], result_types=[VectorType(Float32Type(), [4])],
                         attributes={"element": StringAttr(element)})

    def verify_(self) -> None:
        if self.element.data not in MMA_ELEMENTS:
            raise VerifyException(f"'{self.name}' multiplies bf16 or f16, found element = \"{self.element.data}\"")
        f32x4 = VectorType(Float32Type(), [4])
        if (self.a.type, self.b.type, self.c.type, self.result.type) != (VectorType(i32, [4]), VectorType(i32, [2]),
                                                                         f32x4, f32x4):
            raise VerifyException(f"'{self.name}' takes vector<4xi32> (A), vector<2xi32> (B) and vector<4xf32> (C) "
                                  "and gives vector<4xf32>")


WARP_OPS = (LdMatrixOp, MmaSyncOp)


# -- cp.async (sm_80): asynchronous 16-byte copies from global into shared memory -------------------

@irdl_op_definition
class CpAsyncOp(IRDLOperation):
    """Start copying 16 bytes (8 elements of 16 bits) from element `src_index` of `src` (global
    memory; the row-major linear index, so `flatten-tensors` keeps it) to element `dst_index` of
    `dst` (shared memory), or 16 zero bytes when `valid` is false
    (PTX `cp.async.cg.shared.global [dst], [src], 16, src_size`, src_size 16 or 0). The result is
    `dst`; the bytes are there after `cp_async_wait` (and, for other threads, a barrier). The CPU
    copies at once, which is exact for kernels that wait before reading."""

    name = "xla.cp_async"

    dst = operand_def()
    dst_index = operand_def(IndexType)
    src = operand_def()
    src_index = operand_def(IndexType)
    valid = operand_def(i1)
    result = result_def()

    assembly_format = ("$dst `[` $dst_index `]` `,` $src `[` $src_index `]` `if` $valid attr-dict `:` type($dst) `,` "
                       "type($src) `->` type($result)")

    def __init__(self, dst: SSAValue, dst_index: SSAValue, src: SSAValue, src_index: SSAValue, valid: SSAValue):
        super().__init__(operands=[dst, dst_index, src, src_index, valid], result_types=[SSAValue.get(dst).type])

    def verify_(self) -> None:
        for what, t in (("dst", self.dst.type), ("src", self.src.type)):
            if isinstance(t, TensorType):
                if (what == "dst" and t.get_num_dims() != 1) or _bits(t.element_type) != 16:
                    raise VerifyException(f"'{self.name}' {what} must be a {'1-d ' if what == 'dst' else ''}tensor of "
                                          f"16-bit elements, found {t}")
            elif not isinstance(t, LLVMPointerType):
                raise VerifyException(f"'{self.name}' {what} must be a tensor or a pointer, found {t}")
        if self.result.type != self.dst.type:
            raise VerifyException(f"'{self.name}' result must have the type of dst")


@irdl_op_definition
class CpAsyncCommitOp(IRDLOperation):
    """Close the group of this thread's cp_async ops started since the last commit
    (`cp.async.commit_group`)."""

    name = "xla.cp_async_commit"

    assembly_format = "attr-dict"


class WaitGroupOp(IRDLOperation):
    """A wait op (cp_async_wait, wgmma_wait_group): `operands_` pass through as `results_`, with
    `pending` groups left in flight; its results have its operands' types."""

    assembly_format = "$operands_ attr-dict `:` type($operands_) `->` type($results_)"

    def __init__(self, values: Sequence[SSAValue], pending: int):
        super().__init__(operands=[values], result_types=[[SSAValue.get(v).type for v in values]],
                         attributes={"pending": IntegerAttr(pending, 64)})

    def verify_(self) -> None:
        if [v.type for v in self.operands_] != [r.type for r in self.results_]:
            raise VerifyException(f"'{self.name}' results must have the types of its operands")
        if self.pending.value.data < 0:
            raise VerifyException(f"'{self.name}' pending must be non-negative, found {self.pending.value.data}")


@irdl_op_definition
class CpAsyncWaitOp(WaitGroupOp):
    """Wait until at most `pending` of this thread's committed cp_async groups are in flight
    (`cp.async.wait_group`); returns the shared tensors the copies write, so reads depend on it."""

    name = "xla.cp_async_wait"

    operands_ = var_operand_def()
    results_ = var_result_def()
    pending = attr_def(IntegerAttr)


CP_ASYNC_OPS = (CpAsyncOp, CpAsyncCommitOp, CpAsyncWaitOp)

__all__ = ["CP_ASYNC_OPS", "MMA_ELEMENTS", "WARP_OPS", "CpAsyncCommitOp", "CpAsyncOp", "CpAsyncWaitOp", "LdMatrixOp",
           "MmaSyncOp", "WaitGroupOp", "check_shared_source"]
