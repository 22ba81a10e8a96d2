"""CUtensorMaps for TMA kernels (sm_90a; codegen/ir/tma_ops.py): what a launch encodes with the
driver's cuTensorMapEncodeTiled for each tensor-map parameter of a kernel, from the kernel's
`TensorMapSpec` (element type, dims, strides, box, swizzle: known when the kernel was compiled) and
the buffer's device address (known at launch), then passes by value (`.param .align 64 .b8 [128]`).

`tensor_map_arguments` is the whole construction, a pure function checked against the CUDA driver
API's documented constraints (tests/backends/cuda/test_tensor_map.py); driver.py's
`encode_tensor_map` hands its result to the driver, which only a GPU machine runs. In cuda-sim the
kernel's simulation reads the same spec (codegen/llvm/tma_simulation.py) and the buffer's host address.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlocc.codegen.ir.tma_ops import TensorMapSpec
from hlocc.errors import HloError

DATA_TYPES = {"bf16": "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16", "f16": "CU_TENSOR_MAP_DATA_TYPE_FLOAT16"}
SWIZZLES = {0: "CU_TENSOR_MAP_SWIZZLE_NONE", 32: "CU_TENSOR_MAP_SWIZZLE_32B", 64: "CU_TENSOR_MAP_SWIZZLE_64B",
            128: "CU_TENSOR_MAP_SWIZZLE_128B"}
GLOBAL_ALIGNMENT = 16


class TensorMapError(HloError):
    """A tensor map the driver would refuse (the CUDA driver API's constraints, named)."""


@dataclass(frozen=True)
class TensorMapArguments:
    """The arguments of cuTensorMapEncodeTiled, in its order (enums by their driver names)."""

    data_type: str
    rank: int
    address: int
    dims: tuple[int, ...]
    strides: tuple[int, ...]
    box: tuple[int, ...]
    element_strides: tuple[int, ...]
    interleave: str
    swizzle: str
    l2_promotion: str
    oob_fill: str


def tensor_map_arguments(spec: TensorMapSpec, address: int) -> TensorMapArguments:
    """The cuTensorMapEncodeTiled arguments for `spec` over the buffer at device `address`: tiled,
    no interleave, element strides 1, out-of-bounds elements filled with zeros (OOB fill NONE;
    NAN_REQUEST_ZERO_FMA would give NaNs), L2 promotion of 128 bytes (the box rows' width). Raises
    TensorMapError naming each broken constraint."""
    problems = spec.problems()
    if address % GLOBAL_ALIGNMENT:
        problems.insert(0, f"the global address must be {GLOBAL_ALIGNMENT}-byte aligned, found {address:#x}")
    if problems:
        raise TensorMapError(f"tensor map ({spec.element}, dims {list(spec.dims)}, box {list(spec.box)}): "
                             + "; ".join(problems))
    rank = len(spec.dims)
    return TensorMapArguments(DATA_TYPES[spec.element], rank, address, tuple(spec.dims), tuple(spec.strides),
                              tuple(spec.box), (1,) * rank, "CU_TENSOR_MAP_INTERLEAVE_NONE", SWIZZLES[spec.swizzle],
                              "CU_TENSOR_MAP_L2_PROMOTION_L2_128B", "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE")


__all__ = ["TensorMapArguments", "TensorMapError", "tensor_map_arguments"]
