"""The warpgroup ops (codegen/ir/warpgroup_ops.py): their verifiers' messages, the sm_90a target
(PTX 8.0 only there; sm_90 keeps 7.8), and their PTX: a one-warpgroup kernel lowered to the NVVM
intrinsics and the inline `wgmma.mma_async`, which ptxas assembles for sm_90a. The PTX is made in a
subprocess: NVPTX aborts the process on an intrinsic it cannot select."""

from __future__ import annotations

import pathlib
import shutil
import subprocess

import pytest
from _ptx_device import ptx_in_subprocess
from _wgmma_kernels import wgmma_kernel

from hlocc.analysis.launch import LaunchDims
from hlocc.backends.cuda.ptx import PtxError, compile_kernel_module_to_ptx, ptx_version, target_for
from hlocc.codegen.context import KernelIRError
from hlocc.codegen.emitters.base import KernelModule
from hlocc.hlo.parser import parse_shape
from hlocc.tools.opt import parse_module

FILECHECK = shutil.which("filecheck")


@pytest.mark.parametrize("old,new,message", [
    ('{n = 16 : i64, element = "bf16"}', '{n = 12 : i64, element = "bf16"}',
     r"'xla.wgmma_mma_async' m64nNk16 needs N a multiple of 8 in \[8, 256\], found n = 12"),
    ('{n = 16 : i64, element = "bf16"}', '{n = 264 : i64, element = "bf16"}',
     r"'xla.wgmma_mma_async' m64nNk16 needs N a multiple of 8 in \[8, 256\], found n = 264"),
    ('{n = 16 : i64, element = "bf16"}', '{n = 32 : i64, element = "bf16"}',
     r"'xla.wgmma_mma_async' with n = 32 takes and gives vector<16xf32> \(N/2 f32 per thread\), found "
     r"vector<8xf32> -> vector<8xf32>"),
    ('{n = 16 : i64, element = "bf16"}', '{n = 16 : i64, element = "f32"}',
     r"'xla.wgmma_mma_async' multiplies bf16 or f16, found element = \"f32\""),
    ("swizzle = 128 : i64", "swizzle = 16 : i64", r"'xla.wgmma_descriptor' swizzle must be 0, 32, 64 or 128 bytes, "
                                                   r"found 16"),
    ("sbo = 1024 : i64", "sbo = 1000 : i64", r"'xla.wgmma_descriptor' sbo must be a multiple of 16 bytes in "
                                             r"\[0, 2\^18\) \(the descriptor holds it >> 4 in 14 bits\), found 1000"),
    ("lbo = 16 : i64", "lbo = 262144 : i64", r"'xla.wgmma_descriptor' lbo must be a multiple of 16 bytes"),
    ("{pending = 0 : i64}", "{pending = -1 : i64}", r"'xla.wgmma_wait_group' pending must be non-negative, found -1"),
])
def test_malformed_warpgroup_ops_are_refused_with_the_cause(old, new, message):
    text = wgmma_kernel(16, 6144, b_offset=4608)
    assert old in text
    with pytest.raises(KernelIRError, match=message):
        parse_module(text.replace(old, new))


def test_sm_90a_takes_ptx_8_and_sm_90_keeps_7_8():
    assert (ptx_version("sm_90a"), ptx_version("sm_90"), ptx_version("sm_80")) == (80, 78, 78)
    assert target_for("sm_90a").max_shared_memory_bytes == target_for("sm_90").max_shared_memory_bytes
    with pytest.raises(PtxError, match="unknown GPU arch 'sm_80a'"):
        ptx_version("sm_80a")


def _kernel(n: int) -> tuple[KernelModule, list]:
    size = 4096 + 512 * n // 8
    kernel = KernelModule(parse_module(wgmma_kernel(n, size, b_offset=4096)), "main", LaunchDims(128, 1), 3, 1)
    shapes = [parse_shape(s) for s in (f"s16[{size}]", "s64[128,2]", f"f32[128,{n // 2}]", f"f32[128,{n // 2}]")]
    return kernel, shapes


def test_wgmma_needs_sm_90a():
    kernel, shapes = _kernel(8)
    with pytest.raises(PtxError, match=r"kernel 'main' uses wgmma, which only sm_90a has \(compile it for sm_90a, "
                                       r"not sm_90\)"):
        compile_kernel_module_to_ptx(kernel, target_for("sm_90"), shapes[:3], shapes[3:])


_PTX_SCRIPT = """
import json, sys
sys.path.insert(0, {tests!r})
sys.modules.pop("_wgmma_kernels", None)
from test_wgmma_ops import _kernel
from hlocc.backends.cuda.ptx import compile_kernel_module_to_ptx, target_for, validate_ptx
out = {{}}
for n in (8, 128, 256):
    kernel, shapes = _kernel(n)
    ptx = compile_kernel_module_to_ptx(kernel, target_for("sm_90a"), shapes[:3], shapes[3:]).ptx
    validate_ptx(ptx, "sm_90a")
    out[n] = ptx
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def ptx_texts() -> dict[str, str]:

    return ptx_in_subprocess(_PTX_SCRIPT.format(tests=str(pathlib.Path(__file__).parent)))


_CHECKS = """
CHECK: .version 8.0
CHECK: .target sm_90a
CHECK: .shared .align 1024 .b8
CHECK: st.shared.b16
CHECK: fence.proxy.async.shared::cta;
CHECK-NEXT: bar.sync 0;
CHECK: wgmma.fence.sync.aligned;
CHECK: wgmma.mma_async.sync.aligned.m64nNNNk16.f32.bf16.bf16 {REGS}, %rd{{[0-9]+}}, %rd{{[0-9]+}}, 1, 1, 1, 0, 0;
CHECK: wgmma.commit_group.sync.aligned;
CHECK-NEXT: wgmma.wait_group.sync.aligned 0;
"""


@pytest.mark.skipif(FILECHECK is None, reason="the `filecheck` command (PyPI filecheck) is not installed")
@pytest.mark.parametrize("n", [8, 128, 256])
def test_ptx_has_the_wgmma_sequence_and_ptxas_accepts_it(ptx_texts, n, tmp_path):
    checks = tmp_path / "checks.txt"
    regs = ", ".join(["%r{{[0-9]+}}"] * (n // 2))  # the N/2 f32 accumulators
    checks.write_text(_CHECKS.replace("NNN", str(n)).replace("REGS", regs))
    ptx = ptx_texts[str(n)]
    result = subprocess.run([FILECHECK, str(checks)], input=ptx, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "call.uni" not in ptx  # a misspelt llvm.nvvm name becomes an external call
