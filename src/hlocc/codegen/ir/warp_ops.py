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

from xdsl.dialects.builtin import Float32Type, IndexType, IntegerAttr, StringAttr, TensorType, UnitAttr, VectorType, i32
from xdsl.dialects.llvm import LLVMPointerType
from xdsl.ir import SSAValue
from xdsl.irdl import IRDLOperation, attr_def, irdl_op_definition, operand_def, opt_attr_def, result_def
from xdsl.utils.exceptions import VerifyException

MMA_ELEMENTS = ("bf16", "f16")
"""The operand types of `mma_sync` (both accumulate in f32)."""


def _bits(t) -> int | None:
    return t.width.data if hasattr(t, "width") else getattr(t, "bitwidth", None)


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
        t = self.source.type
        if isinstance(t, TensorType):
            if t.get_num_dims() != 1 or _bits(t.element_type) != 16:
                raise VerifyException(f"'{self.name}' reads a 1-d tensor of 16-bit elements (shared memory), "
                                      f"found {t}")
        elif not isinstance(t, LLVMPointerType):
            raise VerifyException(f"'{self.name}' reads a tensor or a pointer, found {t}")


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

__all__ = ["MMA_ELEMENTS", "WARP_OPS", "LdMatrixOp", "MmaSyncOp"]
