"""`xla.wgmma_mma_async` (codegen/ir/warpgroup_ops.py) in the SIMT simulation
(codegen/llvm/warpgroup_simulation.py) against a numpy model of PTX's documentation, written here
on its own: the shared-memory image of A and B is laid out by the canonical K-major layouts
(core matrices of 8 rows x 16 bytes; the 32/64/128-byte swizzles as an xor of address bits [7, ..)
into bits [4, ..)), the 64-bit descriptors are packed from their documented bit fields, and each
thread's D registers are compared with the documented fragment layout (row 16w + l/4 + 8((i/2)%2),
column 8(i/4) + 2(l%4) + i%2). Integer-valued inputs: sums exact in any order."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from _wgmma_kernels import wgmma_kernel

from hlocc.analysis.launch import LaunchDims
from hlocc.backends.cpu.kernel import compile_kernel_module
from hlocc.codegen.emitters.base import KernelModule
from hlocc.codegen.llvm import TranslationError
from hlocc.codegen.target import gpu_target
from hlocc.hlo.parser import parse_shape
from hlocc.tools.opt import parse_module

DTYPES = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}
MODES = {0: 0, 128: 1, 64: 2, 32: 3}


def _desc(address: int, swizzle: int, lbo: int, sbo: int, base_offset: int = 0) -> int:
    value = (address & 0x3FFFF) >> 4 | (lbo >> 4) << 16 | (sbo >> 4) << 32 | base_offset << 49 | MODES[swizzle] << 62
    return value - (1 << 64) if value >= 1 << 63 else value  # as the kernel's i64


def _place(image: np.ndarray, matrix: np.ndarray, start: int, swizzle: int, lbo: int, sbo: int) -> None:
    """Write `matrix` (rows x 16, K-major) into the byte image at `start` by the canonical layout."""
    pitch = swizzle or 16
    bits = {0: 0, 32: 1, 64: 2, 128: 3}[swizzle]
    raw = matrix.view(np.uint16)
    for r in range(matrix.shape[0]):
        for k in range(16):
            linear = start + (r % 8) * pitch + (r // 8) * sbo + (k // 8) * (lbo if swizzle == 0 else 16) + (k % 8) * 2
            address = linear ^ (((linear >> 7) & ((1 << bits) - 1)) << 4)
            image[address:address + 2] = np.frombuffer(raw[r, k].tobytes(), np.uint8)


def _expected(a: np.ndarray, b: np.ndarray, c: np.ndarray, n: int) -> np.ndarray:
    """Each thread's D registers: D = A·Bᵀ + C by the documented fragment layout."""
    d = a.astype(np.float32) @ b.astype(np.float32).T
    out = np.zeros((128, n // 2), np.float32)
    for t in range(128):
        w, lane = t // 32, t % 32
        for i in range(n // 2):
            row, col = 16 * w + lane // 4 + 8 * ((i // 2) % 2), 8 * (i // 4) + 2 * (lane % 4) + i % 2
            out[t, i] = d[row, col] + c[t, i]
    return out


def _run(n: int, image: np.ndarray, descs: np.ndarray, c: np.ndarray, element: str = "bf16") -> np.ndarray:
    size = image.size // 2
    kernel = KernelModule(parse_module(wgmma_kernel(n, size, element)), "main", LaunchDims(128, 1), 3, 1)
    shapes = [parse_shape(s) for s in (f"s16[{size}]", "s64[128,2]", f"f32[128,{n // 2}]", f"f32[128,{n // 2}]")]
    run = compile_kernel_module(kernel, gpu_target(), shapes[:3], shapes[3:])
    return np.asarray(run(image.view(np.int16), descs, c)).reshape(128, n // 2)


def _case(n: int, swizzle: int, element: str, seed: int, a_start: int = 0, lbo: int = 0):
    rng = np.random.default_rng(seed)
    dtype = DTYPES[element]
    a = rng.integers(-8, 9, (64, 16)).astype(dtype)
    b = rng.integers(-8, 9, (n, 16)).astype(dtype)
    c = rng.integers(-50, 51, (128, n // 2)).astype(np.float32)
    pitch = swizzle or 16
    lbo = lbo or (8 * pitch if swizzle == 0 else 16)  # no swizzle: the k halves after one 8-row core block
    sbo = 8 * pitch if swizzle else 2 * 8 * pitch
    a_bytes = 8 * sbo + 1024
    b_start = -(-(a_start + a_bytes) // 1024) * 1024
    image = np.zeros(b_start + -(-n // 8) * sbo + 1024, np.uint8)
    _place(image, a, a_start, swizzle, lbo, sbo)
    _place(image, b, b_start, swizzle, lbo, sbo)
    descs = np.tile(np.array([_desc(a_start, swizzle, lbo, sbo), _desc(b_start, swizzle, lbo, sbo)], np.int64), (128, 1))
    return a, b, c, image, descs


# by default every swizzle at n = 8, and the f16 and wide-n cases at no swizzle and the 128-byte one
# (the ends); the other five points (1-4 s each on two loaded cores) in the slow set
WGMMA_DEFAULT = {(8, "bf16", 0), (8, "bf16", 32), (8, "bf16", 64), (8, "bf16", 128), (24, "f16", 0), (24, "f16", 128),
                 (64, "bf16", 128)}


@pytest.mark.parametrize("n, element, swizzle", [
    pytest.param(n, e, sw, id=f"{n}-{e}-{sw}", marks=[] if (n, e, sw) in WGMMA_DEFAULT else [pytest.mark.slow])
    for n, e in [(8, "bf16"), (24, "f16"), (64, "bf16")] for sw in (0, 32, 64, 128)])
def test_wgmma_reads_the_documented_layouts(swizzle, n, element):
    a, b, c, image, descs = _case(n, swizzle, element, seed=n + swizzle)
    np.testing.assert_array_equal(_run(n, image, descs, c, element), _expected(a, b, c, n))


@pytest.mark.parametrize("ks", [1, 2, 3])
def test_a_k_step_inside_a_128_byte_swizzled_row_is_an_advanced_start_address(ks):
    """A 64 x 64 tile in 128-byte rows, chunk j of row r stored at chunk j xor (r % 8): the k step ks
    (elements 16ks .. 16ks + 15) is the descriptor with its start 32·ks bytes further, the swizzle
    following the address (CUTLASS's DescriptorIterator and Triton advance k the same way)."""
    rng = np.random.default_rng(ks)
    n = 16
    a = rng.integers(-8, 9, (64, 64)).astype(ml_dtypes.bfloat16)
    b = rng.integers(-8, 9, (n, 64)).astype(ml_dtypes.bfloat16)
    image = np.zeros(8192 + 2048, np.uint8)
    for base, matrix in ((0, a), (8192, b)):
        raw = matrix.view(np.uint16)
        for r in range(matrix.shape[0]):
            for k in range(64):
                chunk = (k // 8) ^ (r % 8)
                address = base + (r // 8) * 1024 + (r % 8) * 128 + chunk * 16 + (k % 8) * 2
                image[address:address + 2] = np.frombuffer(raw[r, k].tobytes(), np.uint8)
    c = np.zeros((128, n // 2), np.float32)
    descs = np.tile(np.array([_desc(32 * ks, 128, 16, 1024), _desc(8192 + 32 * ks, 128, 16, 1024)], np.int64),
                    (128, 1))
    got = _run(n, image, descs, c)
    np.testing.assert_array_equal(got, _expected(a[:, 16 * ks:16 * ks + 16], b[:, 16 * ks:16 * ks + 16], c, n))


def test_a_misread_layout_fails():
    """The model is not vacuous: an image laid out without the swizzle its descriptor declares
    gives a different product."""
    a, b, c, image, descs = _case(16, 128, "bf16", seed=3)
    wrong = np.zeros_like(image)
    b_start = (int(descs[0, 1]) & 0x3FFF) << 4
    _place(wrong, a, 0, 0, 128 * 8, 1024)
    _place(wrong, b, b_start, 0, 128 * 8, 1024)
    assert not np.array_equal(_run(16, wrong, descs, c), _expected(a, b, c, 16))


def test_undefined_descriptors_give_nan():
    """A base offset (not modelled), a thread whose descriptor differs from its warpgroup's and an
    operand outside the block's shared memory poison the registers instead of passing by luck."""
    n = 8
    a, b, c, image, descs = _case(n, 128, "bf16", seed=5)
    bad = descs.copy()
    bad[5, 0] += 1 << 4  # thread 5 points elsewhere: only its registers are undefined
    got = _run(n, image, bad, c)
    assert np.isnan(got[5]).all() and not np.isnan(np.delete(got, 5, axis=0)).any()
    offset = descs.copy()
    offset[:, 1] |= 1 << 49
    assert np.isnan(_run(n, image, offset, c)).all()
    outside = descs.copy()
    outside[:, 0] = _desc(image.size - 16, 128, 16, 1024)
    assert np.isnan(_run(n, image, outside, c)).all()


def test_warpgroup_ops_need_whole_warpgroups():
    text = wgmma_kernel(8, 4096, threads=64)
    kernel = KernelModule(parse_module(text), "main", LaunchDims(64, 1), 3, 1)
    shapes = [parse_shape(s) for s in ("s16[4096]", "s64[64,2]", "f32[64,4]", "f32[64,4]")]
    with pytest.raises(TranslationError, match="warpgroup ops need whole warpgroups \\(128 threads\\), but the block "
                                               "has 64 threads"):
        compile_kernel_module(kernel, gpu_target(), shapes[:3], shapes[3:])


def test_the_descriptor_op_addresses_the_shared_window():
    """`xla.wgmma_descriptor` of shared elements 0 and 4608 (128-byte swizzle, SBO 1024) gives the
    descriptors the model packs for byte addresses 0 and 9216: the window's offsets are shared
    addresses."""
    n = 16
    a, b, c, image, _ = _case(n, 128, "bf16", seed=11)
    size = image.size // 2
    kernel = KernelModule(parse_module(wgmma_kernel(n, size, b_offset=4608)), "main", LaunchDims(128, 1), 3, 1)
    shapes = [parse_shape(s) for s in (f"s16[{size}]", "s64[128,2]", f"f32[128,{n // 2}]", f"f32[128,{n // 2}]")]
    run = compile_kernel_module(kernel, gpu_target(), shapes[:3], shapes[3:])
    got = np.asarray(run(image.view(np.int16), np.zeros((128, 2), np.int64), c)).reshape(128, n // 2)
    np.testing.assert_array_equal(got, _expected(a, b, c, n))
