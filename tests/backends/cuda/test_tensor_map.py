"""The host side of TMA (backends/cuda/tensor_map.py): the cuTensorMapEncodeTiled arguments a launch
builds for a kernel's tensor-map parameter, checked against the CUDA driver API's documented
constraints (no GPU is needed: only `encode_tensor_map` calls the driver), and the kernel op's
verifier, which names the same constraints."""

from __future__ import annotations

import pytest

from hlocc.backends.cuda.tensor_map import TensorMapError, tensor_map_arguments
from hlocc.codegen.ir.tma_ops import TensorMapSpec

A = TensorMapSpec("bf16", (192, 256), (384,), (64, 128), 128)  # A (256 x 192) row-major, K-major boxes


def test_arguments_follow_the_spec_and_the_address():
    a = tensor_map_arguments(A, 0x7F0000001000)
    assert (a.data_type, a.rank, a.address) == ("CU_TENSOR_MAP_DATA_TYPE_BFLOAT16", 2, 0x7F0000001000)
    assert (a.dims, a.strides, a.box, a.element_strides) == ((192, 256), (384,), (64, 128), (1, 1))
    assert (a.interleave, a.swizzle, a.oob_fill) == ("CU_TENSOR_MAP_INTERLEAVE_NONE", "CU_TENSOR_MAP_SWIZZLE_128B",
                                                     "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE")  # zeros, not NaN
    f16 = tensor_map_arguments(TensorMapSpec("f16", (64, 37, 3), (128, 4736), (64, 64, 1), 128), 256)
    assert (f16.data_type, f16.rank, f16.element_strides) == ("CU_TENSOR_MAP_DATA_TYPE_FLOAT16", 3, (1, 1, 1))


@pytest.mark.parametrize("spec,address,message", ids=["address", "stride", "box_inner_over_swizzle", "box_256",
                                                      "inner_16_bytes", "rank", "dims", "element"], argvalues=[
    (A, 0x1008, r"the global address must be 16-byte aligned, found 0x1008"),
    (TensorMapSpec("bf16", (37, 67), (74,), (64, 64), 128), 0, r"strides must be positive multiples of 16 bytes"),
    (TensorMapSpec("bf16", (192, 256), (384,), (128, 64), 128), 0,
     r"the inner box dimension \(256 bytes\) must be at most the 128-byte swizzle span"),
    (TensorMapSpec("bf16", (192, 512), (384,), (64, 512), 128), 0, r"box sizes must be in \[1, 256\]"),
    (TensorMapSpec("bf16", (192, 256), (384,), (4, 64), 0), 0, r"inner box dimension must be a multiple of 16 bytes"),
    (TensorMapSpec("bf16", (1,) * 6, (16,) * 5, (1,) * 6, 0), 0, r"rank 6 needs 1 to 5 dims"),
    (TensorMapSpec("bf16", (192, 0), (384,), (64, 64), 128), 0, r"dims must be in \[1, 2\^32\]"),
    (TensorMapSpec("f32", (64, 64), (256,), (32, 64), 128), 0, r"element type 'f32' is not one of bf16, f16"),
])
def test_arguments_refuse_what_the_driver_refuses(spec, address, message):
    with pytest.raises(TensorMapError, match=message):
        tensor_map_arguments(spec, address)
