"""`xla.ldmatrix` and `xla.mma_sync` (codegen/ir/warp_ops.py): run exactly in the SIMT simulation
(codegen/llvm/warp_simulation.py, inside a K loop the block simulation fissions) against numpy on
integer-valued bf16/f16 inputs, whose sums are exact in any order; and lowered to the NVVM
intrinsics, which ptxas assembles for sm_80 and sm_90. The PTX is made in a subprocess: NVPTX
aborts the process on an intrinsic it cannot select."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest
from _warp_kernels import warp_mma_kernel

from hlocc.analysis.launch import LaunchDims
from hlocc.backends.cpu.kernel import compile_kernel_module
from hlocc.backends.cuda.ptx import find_ptxas
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
    if find_ptxas() is None:
        pytest.skip("no ptxas: install the CUDA toolkit or the test extra 'nvidia-cuda-nvcc-cu12' (or set HLOCC_PTXAS)")
    import pathlib

    script = _PTX_SCRIPT.format(tests=str(pathlib.Path(__file__).parent))
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


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
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("element", ["bf16", "f16"])
@pytest.mark.parametrize("trans", ["plain", "trans"])
def test_ptx_has_ldmatrix_and_mma_sync_and_ptxas_accepts_it(ptx_texts, arch, element, trans, tmp_path):
    checks = tmp_path / "checks.txt"
    checks.write_text(_CHECKS.format(arch=arch, element=element, trans=".trans" if trans == "trans" else ""))
    ptx = ptx_texts[f"{arch} {element} {trans}"]
    result = subprocess.run([FILECHECK, str(checks)], input=ptx, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "call.uni" not in ptx  # a misspelt llvm.nvvm name becomes an external call (matmul_facts §4.1)
