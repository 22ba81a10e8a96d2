"""`xla.ldmatrix` and `xla.mma_sync` (codegen/ir/warp_ops.py): run exactly in the SIMT simulation
(codegen/llvm/warp_simulation.py, inside a K loop the block simulation fissions) against numpy on
integer-valued bf16/f16 inputs, whose sums are exact in any order; and lowered to the NVVM
intrinsics, which ptxas assembles for sm_80 and sm_90. The PTX is made in a subprocess: NVPTX
aborts the process on an intrinsic it cannot select."""

from __future__ import annotations

import shutil
import subprocess

import ml_dtypes
import numpy as np
import pytest
from _ptx_device import ptx_in_subprocess
from _warp_kernels import warp_mma_kernel

from hlocc.analysis.launch import LaunchDims
from hlocc.backends.cpu.kernel import compile_kernel_module
from hlocc.codegen.emitters.base import KernelModule
from hlocc.codegen.llvm import TranslationError
from hlocc.codegen.target import gpu_target
from hlocc.hlo.parser import parse_shape
from hlocc.tools.opt import parse_module

DTYPES = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}
FILECHECK = shutil.which("filecheck")


def _shapes(element: str):
    return [parse_shape(s) for s in (f"{element}[32,32]", f"{element}[32,16]", "f32[32,16]")]


@pytest.mark.parametrize("element", ["bf16", "f16"])
@pytest.mark.parametrize("trans_b", [False, True], ids=["b_n_major", "b_k_major_trans"])
def test_mma_kernel_is_exact_in_simulation(element, trans_b):
    kernel = KernelModule(parse_module(warp_mma_kernel(trans_b, element)), "main", LaunchDims(128, 1), 2, 1)
    shapes = _shapes(element)
    run = compile_kernel_module(kernel, gpu_target(), shapes[:2], shapes[2:])
    rng = np.random.default_rng(1)
    a = rng.integers(-8, 9, (32, 32)).astype(DTYPES[element])
    b = rng.integers(-8, 9, (32, 16)).astype(DTYPES[element])
    c = np.asarray(run(a, b)).reshape(32, 16)
    np.testing.assert_array_equal(c, a.astype(np.float32) @ b.astype(np.float32))


def test_warp_ops_need_whole_warps():
    text = warp_mma_kernel(False, "bf16").replace("127 : index]", "47 : index]")
    kernel = KernelModule(parse_module(text), "main", LaunchDims(48, 1), 2, 1)
    shapes = _shapes("bf16")
    with pytest.raises(TranslationError, match="warp ops need whole warps, but the block has 48 threads"):
        compile_kernel_module(kernel, gpu_target(), shapes[:2], shapes[2:])


def test_a_warp_op_under_a_thread_dependent_loop_is_refused():
    text = warp_mma_kernel(False, "bf16").replace("scf.for %kt = %i0 to %i2", "scf.for %kt = %i0 to %t")
    kernel = KernelModule(parse_module(text), "main", LaunchDims(128, 1), 2, 1)
    shapes = _shapes("bf16")
    with pytest.raises(TranslationError, match="'scf.for' holds a barrier, shuffle or warp op but its bounds are not"):
        compile_kernel_module(kernel, gpu_target(), shapes[:2], shapes[2:])


_PTX_SCRIPT = """
import json, sys
sys.path.insert(0, {tests!r})
from _warp_kernels import warp_mma_kernel
from hlocc.analysis.launch import LaunchDims
from hlocc.backends.cuda.ptx import compile_kernel_module_to_ptx, target_for, validate_ptx
from hlocc.codegen.emitters.base import KernelModule
from hlocc.hlo.parser import parse_shape
from hlocc.tools.opt import parse_module
out = {{}}
for arch in ("sm_80", "sm_90"):
    for trans in (False, True):
        for element in ("bf16", "f16"):
            kernel = KernelModule(parse_module(warp_mma_kernel(trans, element)), "main", LaunchDims(128, 1), 2, 1)
            shapes = [parse_shape(s) for s in (f"{{element}}[32,32]", f"{{element}}[32,16]", "f32[32,16]")]
            ptx = compile_kernel_module_to_ptx(kernel, target_for(arch), shapes[:2], shapes[2:]).ptx
            validate_ptx(ptx, arch)
            out[f"{{arch}} {{element}} {{'trans' if trans else 'plain'}}"] = ptx
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def ptx_texts() -> dict[str, str]:
    import pathlib

    return ptx_in_subprocess(_PTX_SCRIPT.format(tests=str(pathlib.Path(__file__).parent)))


_CHECKS = """
CHECK: .target {arch}
CHECK: .shared .align 16 .b8
CHECK: bar.sync 0;
CHECK: ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{%r{{{{[0-9]+}}}}, %r{{{{[0-9]+}}}}, %r{{{{[0-9]+}}}}, %r{{{{[0-9]+}}}}}}, [%rd{{{{[0-9]+}}}}];
CHECK: ldmatrix.sync.aligned.m8n8.x2{trans}.shared.b16
CHECK: mma.sync.aligned.m16n8k16.row.col.f32.{element}.{element}.f32
CHECK: bar.sync 0;
"""


@pytest.mark.skipif(FILECHECK is None, reason="the `filecheck` command (PyPI filecheck) is not installed")
@pytest.mark.parametrize("arch", ["sm_80", pytest.param("sm_90", marks=pytest.mark.slow)])  # second arch: slow run
@pytest.mark.parametrize("element", ["bf16", "f16"])
@pytest.mark.parametrize("trans", ["plain", "trans"])
def test_ptx_has_ldmatrix_and_mma_sync_and_ptxas_accepts_it(ptx_texts, arch, element, trans, tmp_path):
    checks = tmp_path / "checks.txt"
    checks.write_text(_CHECKS.format(arch=arch, element=element, trans=".trans" if trans == "trans" else ""))
    ptx = ptx_texts[f"{arch} {element} {trans}"]
    result = subprocess.run([FILECHECK, str(checks)], input=ptx, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "call.uni" not in ptx  # a misspelt llvm.nvvm name becomes an external call (matmul_facts §4.1)


# -- each op alone against PTX's documented layouts (independently of each other) --------------------

def _compile_warp(text: str, shapes: list[str], num_params: int):
    from hlocc.hlo.parser import parse_shape as shape

    kernel = KernelModule(parse_module(text), "main", LaunchDims(32, 1), num_params, len(shapes) - num_params)
    parsed = [shape(s) for s in shapes]
    return compile_kernel_module(kernel, gpu_target(), parsed[:num_params], parsed[num_params:])


@pytest.mark.parametrize("count", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True], ids=["plain", "trans"])
def test_ldmatrix_gives_each_lane_the_ptx_fragment(count, trans):
    """Lane t, word j: elements (t/4, 2(t%4)) and (t/4, 2(t%4)+1) of matrix j, the first in the low
    half; with .trans, elements (2(t%4), t/4) and (2(t%4)+1, t/4) (PTX ISA, ldmatrix)."""
    from _warp_kernels import ldmatrix_kernel

    run = _compile_warp(ldmatrix_kernel(count, trans), ["s16[256]", f"s32[32,{count}]"], 1)
    x = np.arange(256, dtype=np.int16) * 7 + 3
    words = np.asarray(run(x)).reshape(32, count).view(np.uint32)
    matrices = x.reshape(4, 8, 8).astype(np.uint32)
    for t in range(32):
        for j in range(count):
            r, c = (2 * (t % 4), t // 4) if trans else (t // 4, 2 * (t % 4))
            lo, hi = (matrices[j, r, c], matrices[j, r + 1, c]) if trans else (matrices[j, r, c], matrices[j, r, c + 1])
            assert words[t, j] == lo | hi << 16, (t, j)


@pytest.mark.parametrize("element", ["bf16", "f16"])
def test_mma_sync_follows_the_ptx_fragment_layouts(element):
    """A (16x16) word r of lane t holds row g + 8(r%2), k 2q + 8(r/2) + {0, 1}; B (16x8) word r
    holds k 2q + 8r + {0, 1} of column g; C/D element i is row g + 8(i/2), column 2q + i%2
    (g = t/4, q = t%4; PTX ISA, mma.m16n8k16 fragments)."""
    from _warp_kernels import mma_fragments_kernel

    rng = np.random.default_rng(7)
    dtype = DTYPES[element]
    a = rng.integers(-8, 9, (16, 16)).astype(dtype)
    b = rng.integers(-8, 9, (16, 8)).astype(dtype)
    c = rng.integers(-50, 51, (16, 8)).astype(np.float32)
    bits = lambda v: np.asarray(v).view(np.uint16).astype(np.uint32)  # noqa: E731
    a_words, b_words, c_frag = (np.zeros((32, n), np.uint32) for n in (4, 2, 4))
    c_frag = np.zeros((32, 4), np.float32)
    for t in range(32):
        g, q = t // 4, t % 4
        for r in range(4):
            row, k = g + 8 * (r % 2), 2 * q + 8 * (r // 2)
            a_words[t, r] = bits(a[row, k]) | bits(a[row, k + 1]) << 16
        for r in range(2):
            k = 2 * q + 8 * r
            b_words[t, r] = bits(b[k, g]) | bits(b[k + 1, g]) << 16
        for i in range(4):
            c_frag[t, i] = c[g + 8 * (i // 2), 2 * q + i % 2]
    run = _compile_warp(mma_fragments_kernel(element), ["s32[32,4]", "s32[32,2]", "f32[32,4]", "f32[32,4]"], 3)
    d_frag = np.asarray(run(a_words.view(np.int32), b_words.view(np.int32), c_frag)).reshape(32, 4)
    d = a.astype(np.float32) @ b.astype(np.float32) + c
    for t in range(32):
        for i in range(4):
            assert d_frag[t, i] == d[t // 4 + 8 * (i // 2), 2 * (t % 4) + i % 2], (t, i)
