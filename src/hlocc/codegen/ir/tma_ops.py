"""The `xla` dialect's Hopper copy-engine ops for sm_90a (issue 17 item 4): TMA tile loads
(`cp.async.bulk.tensor`) described by a tensor map, and the shared-memory *mbarriers* whose
transaction counts say when a load has landed. On a GPU they are NVVM intrinsics
(codegen/llvm/tma_ops.py); on the CPU the block simulation runs them from the documented semantics
(codegen/llvm/tma_simulation.py).

    %map = xla.tensor_map %a {element = "bf16", dims = [...], strides = [...], box = [64, 128], swizzle = 128 : i64}
    %bars2 = xla.mbarrier_init %bars[%i] count 1 : tensor<6xi64>
    %bars3 = xla.mbarrier_arrive_expect_tx %bars2[%i] bytes 32768 : tensor<6xi64>
    %tile2 = xla.tma_load %map [%c0, %c1], %tile[%j], %bars3[%i] : tensor<24576xbf16>, tensor<6xi64>
    %tile3 = xla.mbarrier_wait %bars3[%i] parity %p (%tile2) : tensor<6xi64>, tensor<24576xbf16>
    %bars4 = xla.mbarrier_arrive %bars3[%i] : tensor<6xi64>

Facts, with their sources (PTX ISA 8.x "mbarrier", "cp.async.bulk.tensor", "Tensor Map"; the CUDA
driver API's cuTensorMapEncodeTiled):

- An mbarrier is 8 bytes of shared memory, 8-byte aligned. `init` with an expected arrival count
  N (1 .. 2^20 - 1) starts phase 0 with N pending arrivals and a transaction count (tx-count) of 0.
  `arrive.expect_tx B` adds B to the tx-count, then arrives (one pending arrival fewer); `arrive`
  arrives; a TMA load's `complete_tx` subtracts its bytes from the tx-count when its data has
  landed. The phase completes when both pending arrivals and tx-count are zero: the barrier moves
  to the next phase, pending arrivals N again. `try_wait.parity P` is true once the phase of
  parity P has completed, i.e. while the current phase's parity is not P (so on a fresh barrier
  parity 1 is already "complete": a producer's first wait on an empty slot passes).
- A tensor map (CUtensorMap, 128 bytes, 64-byte aligned, opaque) describes a tensor of `rank`
  dimensions, innermost first: `dims` (elements), `strides` (bytes, of dimensions 1 .. rank-1;
  multiples of 16), the `box` a load copies (each 1 .. 256 elements; the inner one times the
  element size a multiple of 16 bytes and, with a swizzle, at most the swizzle's span), and a
  swizzle (0, 32, 64, 128 bytes). Box elements outside the tensor are filled with zeros, and the
  full box's bytes count for complete_tx. In shared memory the box is dense, innermost first, and
  each 16-byte chunk of a swizzled box lies at address bits [4, 4+b) xor bits [7, 7+b),
  b = log2(swizzle / 16), of its unswizzled shared address: with a 128-byte inner box and 128-byte
  swizzle, exactly the layout wgmma's 128-byte-swizzle descriptors read (warpgroup_ops.py), when
  the destination is 1024-byte aligned. The destination must be 128-byte aligned.
- Visibility: a load's data may be read after a wait observes its barrier's phase complete; the
  barriers' initialization must reach the async proxy (`fence.proxy.async` and a block barrier)
  before a load signals them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import I64, ArrayAttr, IndexType, IntegerAttr, IntegerType, StringAttr, TensorType, i32, i64
from xdsl.dialects.llvm import LLVMPointerType
from xdsl.ir import SSAValue
from xdsl.irdl import (
    IRDLOperation,
    attr_def,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

TMA_ELEMENTS = {"bf16": 2, "f16": 2}
"""Element types a tensor map here describes, and their bytes."""
SWIZZLE_SPANS = (0, 32, 64, 128)
MAX_BOX = 256
MAX_ARRIVALS = (1 << 20) - 1
MAX_TX_BYTES = (1 << 20) - 1


@dataclass(frozen=True)
class TensorMapSpec:
    """What a tensor map says of its tensor, the global address aside (module doc): the arguments
    of cuTensorMapEncodeTiled (backends/cuda/tensor_map.py) and what the simulation reads."""

    element: str
    dims: tuple[int, ...]
    strides: tuple[int, ...]
    box: tuple[int, ...]
    swizzle: int

    @property
    def element_bytes(self) -> int:
        return TMA_ELEMENTS[self.element]

    @property
    def box_bytes(self) -> int:
        """The bytes one load copies (and counts for complete_tx), out-of-bounds elements included."""
        n = self.element_bytes
        for b in self.box:
            n *= b
        return n

    def problems(self) -> list[str]:
        """The CUDA driver's constraints (cuTensorMapEncodeTiled) this description breaks."""
        out = []
        rank = len(self.dims)
        if self.element not in TMA_ELEMENTS:
            return [f"element type {self.element!r} is not one of {', '.join(TMA_ELEMENTS)}"]
        if not 1 <= rank <= 5 or len(self.box) != rank or len(self.strides) != rank - 1:
            return [f"rank {rank} needs 1 to 5 dims, as many box sizes and rank - 1 strides; found dims "
                    f"{list(self.dims)}, box {list(self.box)}, strides {list(self.strides)}"]
        if any(not 0 < d <= 1 << 32 for d in self.dims):
            out.append(f"dims must be in [1, 2^32], found {list(self.dims)}")
        if any(s % 16 or not 0 < s < 1 << 40 for s in self.strides):
            out.append(f"strides must be positive multiples of 16 bytes below 2^40, found {list(self.strides)}")
        if any(not 0 < b <= MAX_BOX for b in self.box):
            out.append(f"box sizes must be in [1, {MAX_BOX}], found {list(self.box)}")
        inner = self.box[0] * self.element_bytes
        if inner % 16:
            out.append(f"the inner box dimension must be a multiple of 16 bytes, found {inner}")
        if self.swizzle not in SWIZZLE_SPANS:
            out.append(f"swizzle must be 0, 32, 64 or 128 bytes, found {self.swizzle}")
        elif self.swizzle and inner > self.swizzle:
            out.append(f"the inner box dimension ({inner} bytes) must be at most the {self.swizzle}-byte swizzle span")
        return out


def _ints(values: Sequence[int]) -> ArrayAttr:
    return ArrayAttr([IntegerAttr(int(v), 64) for v in values])


def _values(attr: ArrayAttr) -> tuple[int, ...]:
    return tuple(a.value.data for a in attr.data)


def check_barriers(op: IRDLOperation, t) -> None:
    """`t` is the block's mbarriers: a 1-d tensor of i64 (shared memory), or a pointer after
    `lower-tensors`."""
    if isinstance(t, TensorType):
        if t.get_num_dims() != 1 or not (isinstance(t.element_type, IntegerType) and t.element_type.width.data == 64):
            raise VerifyException(f"'{op.name}' takes its mbarrier in a 1-d tensor of i64 (8 bytes each, shared "
                                  f"memory), found {t}")
    elif not isinstance(t, LLVMPointerType):
        raise VerifyException(f"'{op.name}' takes its mbarrier in a tensor or a pointer, found {t}")


@irdl_op_definition
class TensorMapOp(IRDLOperation):
    """The tensor map of kernel operand `source` (a function argument in global memory): on a GPU
    the kernel's by-value CUtensorMap parameter the launch encoded for it; in the simulation the
    same description (module doc). The result is its generic address."""

    name = "xla.tensor_map"

    source = operand_def()
    element = attr_def(StringAttr)
    dims = attr_def(ArrayAttr)
    strides = attr_def(ArrayAttr)
    box = attr_def(ArrayAttr)
    swizzle = attr_def(IntegerAttr)
    result = result_def(LLVMPointerType)
    traits = traits_def(Pure())

    assembly_format = "$source attr-dict `:` type($source) `->` type($result)"

    def __init__(self, source: SSAValue, spec: TensorMapSpec):
        super().__init__(operands=[source], result_types=[LLVMPointerType()],
                         attributes={"element": StringAttr(spec.element), "dims": _ints(spec.dims),
                                     "strides": _ints(spec.strides), "box": _ints(spec.box),
                                     "swizzle": IntegerAttr(spec.swizzle, 64)})

    @property
    def spec(self) -> TensorMapSpec:
        return TensorMapSpec(self.element.data, _values(self.dims), _values(self.strides), _values(self.box),
                             self.swizzle.value.data)

    def verify_(self) -> None:
        problems = self.spec.problems()
        if problems:
            raise VerifyException(f"'{self.name}' is not a valid tensor map: {'; '.join(problems)}")


def _init_args(bars: SSAValue, index: SSAValue, properties: dict) -> dict:
    return {"operands": [bars, index], "result_types": [SSAValue.get(bars).type], "properties": properties}


class _BarrierOp(IRDLOperation):
    """An op on the mbarrier `bars[index]` whose result is `bars` (the order of the ops on it)."""

    def verify_(self) -> None:
        check_barriers(self, self.bars.type)
        if self.result.type != self.bars.type:
            raise VerifyException(f"'{self.name}' result must have the type of its mbarriers")


@irdl_op_definition
class MbarrierInitOp(_BarrierOp):
    """`mbarrier.init.shared.b64 [bar], count`: phase 0, `count` pending arrivals, tx-count 0."""

    name = "xla.mbarrier_init"

    bars = operand_def()
    index = operand_def(IndexType)
    count = prop_def(IntegerAttr[I64])
    result = result_def()

    assembly_format = "$bars `[` $index `]` `count` $count attr-dict `:` type($bars) `->` type($result)"

    def __init__(self, bars: SSAValue, index: SSAValue, count: int):
        super().__init__(**_init_args(bars, index, {"count": IntegerAttr(count, i64)}))

    def verify_(self) -> None:
        super().verify_()
        if not 1 <= self.count.value.data <= MAX_ARRIVALS:
            raise VerifyException(f"'{self.name}' count must be in [1, 2^20 - 1] (the arrivals a phase expects), "
                                  f"found {self.count.value.data}")


@irdl_op_definition
class MbarrierArriveExpectTxOp(_BarrierOp):
    """`mbarrier.arrive.expect_tx.shared.b64 _, [bar], bytes`: the tx-count grows by `bytes` (what
    the TMA loads signalling this barrier will complete), then this thread arrives."""

    name = "xla.mbarrier_arrive_expect_tx"

    bars = operand_def()
    index = operand_def(IndexType)
    bytes = prop_def(IntegerAttr[I64])
    result = result_def()

    assembly_format = "$bars `[` $index `]` `bytes` $bytes attr-dict `:` type($bars) `->` type($result)"

    def __init__(self, bars: SSAValue, index: SSAValue, tx_bytes: int):
        super().__init__(**_init_args(bars, index, {"bytes": IntegerAttr(tx_bytes, i64)}))

    def verify_(self) -> None:
        super().verify_()
        if not 0 <= self.bytes.value.data <= MAX_TX_BYTES:
            raise VerifyException(f"'{self.name}' bytes must be in [0, 2^20 - 1] (the tx-count's range), found "
                                  f"{self.bytes.value.data}")


@irdl_op_definition
class MbarrierArriveOp(_BarrierOp):
    """`mbarrier.arrive.shared.b64 _, [bar]`: this thread arrives (a consumer releasing a slot)."""

    name = "xla.mbarrier_arrive"

    bars = operand_def()
    index = operand_def(IndexType)
    result = result_def()

    assembly_format = "$bars `[` $index `]` attr-dict `:` type($bars) `->` type($result)"

    def __init__(self, bars: SSAValue, index: SSAValue):
        super().__init__(**_init_args(bars, index, {}))


@irdl_op_definition
class MbarrierWaitOp(IRDLOperation):
    """Wait until the phase of `parity` (0 or 1, an i32) of `bars[index]` has completed: a loop of
    `mbarrier.try_wait.parity.shared.b64`. The `values` (the shared tiles the phase's loads filled)
    pass through: their results may be read."""

    name = "xla.mbarrier_wait"

    bars = operand_def()
    index = operand_def(IndexType)
    parity = operand_def(i32)
    operands_ = var_operand_def()
    results_ = var_result_def()

    assembly_format = ("$bars `[` $index `]` `parity` $parity `(` $operands_ `)` attr-dict `:` type($bars) `,` "
                       "type($parity) (`,` type($operands_)^)? `->` type($results_)")

    def __init__(self, bars: SSAValue, index: SSAValue, parity: SSAValue, values: Sequence[SSAValue] = ()):
        super().__init__(operands=[bars, index, parity, list(values)],
                         result_types=[[SSAValue.get(v).type for v in values]])

    def verify_(self) -> None:
        check_barriers(self, self.bars.type)
        if [v.type for v in self.operands_] != [r.type for r in self.results_]:
            raise VerifyException(f"'{self.name}' results must have the types of its operands")


@irdl_op_definition
class TmaLoadOp(IRDLOperation):
    """Start the TMA load of the box of `map` at `coords` (elements, innermost first; one per
    dimension) into `tile` from element `tile_index` (shared memory, 128-byte aligned), signalling
    `bars[bar_index]` with complete_tx of the box's bytes (`cp.async.bulk.tensor.Nd.shared::cluster.
    global.tile.mbarrier::complete_tx::bytes`). The result is `tile`; its bytes are there once a
    wait sees the barrier's phase complete."""

    name = "xla.tma_load"

    map = operand_def(LLVMPointerType)
    coords = var_operand_def(IndexType)
    tile = operand_def()
    tile_index = operand_def(IndexType)
    bars = operand_def()
    bar_index = operand_def(IndexType)
    result = result_def()

    assembly_format = ("$map `[` $coords `]` `,` $tile `[` $tile_index `]` `,` $bars `[` $bar_index `]` attr-dict "
                       "`:` type($map) `,` type($tile) `,` type($bars) `->` type($result)")

    def __init__(self, tensor_map: SSAValue, coords: Sequence[SSAValue], tile: SSAValue, tile_index: SSAValue,
                 bars: SSAValue, bar_index: SSAValue):
        super().__init__(operands=[tensor_map, list(coords), tile, tile_index, bars, bar_index],
                         result_types=[SSAValue.get(tile).type])

    def verify_(self) -> None:
        check_barriers(self, self.bars.type)
        if self.result.type != self.tile.type:
            raise VerifyException(f"'{self.name}' result must have the type of its tile")
        owner = self.map.owner
        if isinstance(owner, TensorMapOp) and len(self.coords) != len(owner.dims.data):
            raise VerifyException(f"'{self.name}' needs one coordinate per dimension of its tensor map "
                                  f"({len(owner.dims.data)}), found {len(self.coords)}")
        t = self.tile.type
        if isinstance(t, TensorType) and t.get_num_dims() != 1:
            raise VerifyException(f"'{self.name}' loads into a 1-d tensor (shared memory), found {t}")


TMA_OPS = (TensorMapOp, MbarrierInitOp, MbarrierArriveExpectTxOp, MbarrierArriveOp, MbarrierWaitOp, TmaLoadOp)

__all__ = ["MAX_BOX", "SWIZZLE_SPANS", "TMA_ELEMENTS", "TMA_OPS", "MbarrierArriveExpectTxOp", "MbarrierArriveOp",
           "MbarrierInitOp", "MbarrierWaitOp", "TensorMapOp", "TensorMapSpec", "TmaLoadOp", "check_barriers"]
