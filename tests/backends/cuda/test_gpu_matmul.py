"""The GPU matmul (issue 17 item 4): dot fusions scheduled with `transform.hlocc.set_operand_layout`
lowered to ldmatrix + mma.sync (codegen/transforms/matmul/gpu_mma.py; with the cp.async ring of
gpu_mma_pipeline.py), run exactly in the SIMT
simulation against the evaluator on integer-valued bf16/f16 inputs (any M, N, K: 1, 0, primes,
128-multiples ± 1; transposed operands; batch; a fused epilogue), rejected with the transform op's
name when the schedule is illegal, and assembled by ptxas for sm_80 and sm_90 with the
instructions a FileCheck expects. The default run uses a small warp layout (one 32 x 16 block
tile of four 16 x 8 warps: the same code, fewer fragments); the 128 x 128 x 32 schedule the cuda
backend chooses runs with the slow tests (its simulation compiles for 10-20 s)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest
from _ptx_device import ptx_in_subprocess

import hlocc
from hlocc.backends.cpu.kernel import compile_fusion
from hlocc.backends.cuda.ptx import find_ptxas
from hlocc.codegen.pipeline import PipelineOptions
from hlocc.codegen.schedule import MatmulSchedule, ScheduleError, use_schedule
from hlocc.codegen.schedule.gpu_choice import (
    MMA_CANDIDATES,
    MMA_DEEP,
    MMA_SCHEDULE,
    MMA_WIDE,
    gpu_schedule,
    shared_bytes,
)
from hlocc.codegen.target import gpu_target
from hlocc.evaluator import Evaluator
from hlocc.hlo.parser import parse_hlo
from hlocc.hlo.types import PRIMITIVE_TYPES
from hlocc.testing.gemm import gemm_fusion_text

SMALL = MatmulSchedule(mc=32, nc=16, kc=16, parallel=True, warp_grid=(2, 2), warp_tile=(16, 8))
SMALL_K32 = MatmulSchedule(mc=32, nc=32, kc=32, parallel=True, warp_grid=(1, 2), warp_tile=(32, 16))
PIPELINED = MatmulSchedule(mc=32, nc=16, kc=16, parallel=True, warp_grid=(2, 2), warp_tile=(16, 8), stages=3)
MN = "lhs_contracting_dims={1}, rhs_contracting_dims={0}"


def _dot(lhs: str, rhs: str, out: str, dims: str = MN, epilogue: str = "") -> str:
    return gemm_fusion_text(lhs, rhs, out, dims, epilogue)


def _square(m: int, n: int, k: int, t: str = "bf16", out: str = "f32") -> str:
    return _dot(f"{t}[{m},{k}]", f"{t}[{k},{n}]", f"{out}[{m},{n}]")


CASES = {
    "ones": _square(1, 1, 1),
    "primes": _square(13, 7, 11),
    "k_zero": _square(3, 5, 0),
    "k_prime_over_blocks": _square(5, 9, 37),
    "f16": _square(17, 19, 23, "f16"),
    "transposed": _dot("bf16[23,13]", "bf16[11,23]{0,1}", "f32[13,11]", "lhs_contracting_dims={0}, "
                       "rhs_contracting_dims={1}"),
    "batched": _dot("bf16[3,5,20]", "bf16[20,3,9]", "f32[3,5,9]",
                    "lhs_batch_dims={0}, rhs_batch_dims={1}, lhs_contracting_dims={2}, rhs_contracting_dims={0}"),
    "bf16_bias_relu": _dot("bf16[33,18]", "bf16[18,17]", "bf16[33,17]", MN,
                           "  c = bf16[17] constant({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17})\n"
                           "  cb = bf16[33,17] broadcast(c), dimensions={1}\n"
                           "  s = bf16[33,17] add(d, cb)\n"
                           "  z = bf16[] constant(0)\n"
                           "  zb = bf16[33,17] broadcast(z), dimensions={}\n"
                           "  ROOT r = bf16[33,17] maximum(s, zb)\n"),
}


def _args(module, seed: int):
    rng = np.random.default_rng(seed)
    return [rng.integers(-4, 5, p.shape.dims).astype(PRIMITIVE_TYPES[p.shape.element_type.name].dtype)
            for p in module.entry.parameters]


def _run_exact(text: str, schedule: MatmulSchedule, seed: int = 0) -> list[str]:
    module = parse_hlo(text)
    args = _args(module, seed)
    expected = Evaluator().run(module, args)
    dumps: list[str] = []
    with use_schedule(schedule):
        kernel = compile_fusion(module.entry, gpu_target(), options=PipelineOptions(True, None, "kernel", dumps.append),
                                use_cache=False)
    assert kernel.launch_dims.threads_per_block == schedule.threads
    got = kernel(*args)[0]
    np.testing.assert_array_equal(np.asarray(got, np.float64), np.asarray(expected, np.float64))
    return dumps


@pytest.mark.parametrize("case", list(CASES))
def test_mma_kernels_are_exact_in_simulation(case):
    dumps = _run_exact(CASES[case], SMALL_K32 if case == "k_prime_over_blocks" else SMALL, seed=len(case))
    lowered = next(d for d in dumps if "After lower-matmul" in d)
    if case != "k_zero":
        assert "xla.mma_sync" in lowered and "xla.ldmatrix" in lowered and "xla.allocate_shared" in lowered


PIPELINE_CASES = {
    # B row-major (contiguous in n): staged k-major, read with ldmatrix .trans; edges in m, n and k
    "b_k_major": (_square(37, 24, 40), True),
    # B as [N, K] (contiguous in k): staged n-major, plain ldmatrix
    "b_n_major": (_dot("bf16[37,40]", "bf16[21,40]", "f32[37,21]", "lhs_contracting_dims={1}, "
                       "rhs_contracting_dims={1}"), True),
    # one K block for three stages: the prologue's second group is empty
    "one_k_block": (_square(5, 16, 8, "f16"), True),
    "batched": (_dot("bf16[2,5,24]", "bf16[2,24,16]", "f32[2,5,16]", "lhs_batch_dims={0}, rhs_batch_dims={0}, "
                     "lhs_contracting_dims={2}, rhs_contracting_dims={1}"), True),
    # N = 21 in B's contiguous dimension: 16-byte chunks would straddle rows; the synchronous staging
    "unaligned_fallback": (_square(37, 21, 40), False),
}


@pytest.mark.parametrize("case", list(PIPELINE_CASES))
def test_cp_async_ring_is_exact_in_simulation(case):
    text, pipelined = PIPELINE_CASES[case]
    lowered = next(d for d in _run_exact(text, PIPELINED, seed=len(case)) if "After lower-matmul" in d)
    assert ("xla.cp_async " in lowered) == pipelined
    if pipelined:
        assert "xla.cp_async_wait" in lowered and "{pending = 1 : i64}" in lowered and "xla.cp_async_commit" in lowered
        assert ("trans" in lowered) == (case != "b_n_major")


@pytest.mark.slow
@pytest.mark.parametrize("m,n,k", [(127, 129, 63), (129, 255, 97), (256, 128, 32), (130, 136, 264), (1, 131, 257)])
def test_the_cuda_schedule_is_exact_in_simulation(m, n, k):
    _run_exact(_square(m, n, k), MMA_SCHEDULE, seed=m + n + k)


# The schedule space benchmarks/gemm_cuda.py --sweep times: each point exact where K (48) is staged
# whole in a row of 6 chunks (a KC of 64 swizzled by up to 7 left the row: rows 2 on were wrong) and
# where it takes two K blocks. The default run takes the smallest point with a KC of 64 (the swizzle
# of up to 7 chunks the K = 48 row checks; 64 x 64 tiles simulate in a fraction of the 256 x 128
# point's ~20 s), the rest are slow.
DEFAULT_CANDIDATE = next(s for s in MMA_CANDIDATES if (s.mc, s.nc, s.kc) == (64, 64, 64))


@pytest.mark.parametrize("schedule", [pytest.param(s, id=f"{s.mc}x{s.nc}x{s.kc}-{s.warp_grid[0]}x{s.warp_grid[1]}-{s.stages}",
                                                   marks=() if s is DEFAULT_CANDIDATE else pytest.mark.slow)
                                      for s in MMA_CANDIDATES])
@pytest.mark.parametrize("k", [48, 80])
def test_every_gpu_candidate_is_exact_in_simulation(schedule, k):
    _run_exact(_square(40, 72, k), schedule, seed=k)


def test_the_gpu_choice():
    # by the arch's shared memory (sm_90: 227 KiB, sm_86: 99, sm_75: 64) and the problem's blocks
    sm_90, sm_86, sm_75 = (gpu_target(n, name=f"sm_{c}") for n, c in ((132, 90), (84, 86), (40, 75)))
    big, small = [1, 4096, 4096, 4096], [1, 5, 7, 3]
    assert gpu_schedule(big, ("bf16",) * 3, sm_90.max_shared_memory_bytes, 132) is MMA_WIDE
    assert gpu_schedule(big, ("bf16",) * 3, sm_86.max_shared_memory_bytes, 84) is MMA_DEEP
    assert gpu_schedule(big, ("bf16",) * 3, sm_75.max_shared_memory_bytes, 40) is MMA_SCHEDULE
    assert gpu_schedule(small, ("f16", "f16", "f32"), sm_90.max_shared_memory_bytes, 132) is MMA_DEEP  # < a wave
    assert gpu_schedule(big, ("bf16",) * 3) is MMA_SCHEDULE  # 48 KiB: every arch
    assert (shared_bytes(MMA_WIDE), shared_bytes(MMA_DEEP), shared_bytes(MMA_SCHEDULE)) == (147456, 98304, 49152)
    assert gpu_schedule([1, 5, 7, 3], ("bf16", "bf16", "f64")).warp_grid is None
    simt = gpu_schedule([1, 5, 7, 3], ("f32", "f32", "f32"))
    assert simt.warp_grid is None and simt.parallel and simt.threads == 1
    assert "set_operand_layout %tiled sg_layout [2, 2] sg_data [64, 64] inst_data [16, 8, 16]" in MMA_SCHEDULE.script()
    assert "set_gpu_launch_threads %tiled threads [128, 1, 1]" in MMA_SCHEDULE.script()
    assert "pipeline_shared_copies %tiled stages 3" in MMA_SCHEDULE.script()


def _fails(text: str, schedule: MatmulSchedule, message: str) -> None:
    module = parse_hlo(text)
    with use_schedule(schedule), pytest.raises(ScheduleError, match=message):
        compile_fusion(module.entry, gpu_target(), use_cache=False)


@pytest.mark.parametrize("text,schedule,message", ids=["f32", "coverage", "inst_multiple", "k_block", "shared", "registers",
                                                      "stages_shared", "one_stage"],
                         argvalues=[
    (_square(8, 8, 8, "f32"), SMALL, r"transform.hlocc.set_operand_layout: mma.sync m16n8k16 multiplies bf16 or "
                                     r"f16 operands of one type, found f32"),
    (_square(64, 64, 16), MatmulSchedule(mc=64, nc=16, kc=16, parallel=True, warp_grid=(2, 2), warp_tile=(16, 8)),
     r"set_operand_layout: sg_layout x sg_data covers 32 along m, but the block tile is 64"),
    (_square(64, 64, 16), MatmulSchedule(mc=32, nc=16, kc=16, parallel=True, warp_grid=(2, 2), warp_tile=(16, 4)),
     r"set_operand_layout: sg_data \[16, 4\] is not a multiple of the instruction's \[16, 8\]"),
    (_square(64, 64, 64), MatmulSchedule(mc=32, nc=16, kc=24, parallel=True, warp_grid=(2, 2), warp_tile=(16, 8)),
     r"set_operand_layout: the K block 24 is not a multiple of the instruction's K \(16\)"),
    (_square(512, 512, 512), MatmulSchedule(mc=256, nc=256, kc=256, parallel=True, warp_grid=(4, 4),
                                            warp_tile=(64, 64)),
     r"set_operand_layout: the staged A and B tiles need 262144 bytes of shared memory, more than 232448"),
    (_square(256, 256, 32), MatmulSchedule(mc=256, nc=128, kc=32, parallel=True, warp_grid=(2, 2),
                                           warp_tile=(128, 64)),
     r"set_operand_layout: a 128x64 warp tile needs 304 registers per thread for its fragments, more than 200"),
    (_square(256, 256, 64), MatmulSchedule(mc=128, nc=128, kc=64, parallel=True, warp_grid=(2, 2), warp_tile=(64, 64),
                                           stages=8),
     r"transform.hlocc.pipeline_shared_copies: 8 stages of the A and B tiles need 262144 bytes of shared memory, "
     r"more than 232448"),
    (_square(64, 64, 64), MatmulSchedule(mc=32, nc=16, kc=16, parallel=True, warp_grid=(2, 2), warp_tile=(16, 8),
                                         stages=1),
     r"transform.hlocc.pipeline_shared_copies: stages must be at least 2, found 1"),
])
def test_illegal_gpu_schedules_name_the_transform_op(text, schedule, message):
    _fails(text, schedule, message)


def test_launch_threads_must_match_the_warps():
    from hlocc.codegen.schedule.builder import MatmulSchedule as Schedule

    class WrongThreads(Schedule):
        def script(self) -> str:
            return super().script().replace("threads [128, 1, 1]", "threads [64, 1, 1]")

    schedule = WrongThreads(mc=32, nc=16, kc=16, parallel=True, warp_grid=(2, 2), warp_tile=(16, 8))
    _fails(_square(8, 8, 8), schedule, r"set_gpu_launch_threads: 64 threads, but sg_layout \[2, 2\] has 4 warps")


def test_cuda_sim_gemm_codegen_runs_dots_as_generated_kernels():
    """f32 dots on a GPU target take the SIMT schedule (one thread per 32 x 32 tile): correct, and
    small enough for the default run; the mma.sync path through hlocc.compile is the slow test below."""
    text = """HloModule m
ENTRY e {
  a = f32[9,7] parameter(0)
  b = f32[7,5] parameter(1)
  ROOT d = f32[9,5] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}"""
    a, b = (np.random.default_rng(3).integers(-4, 5, s).astype(np.float32) for s in ((9, 7), (7, 5)))
    exe = hlocc.compile(text, "cuda-sim", gemm="codegen")
    assert exe.runner.stats.kernels_by_emitter["gemm"] == 1 and not exe.runner.stats.library_calls
    np.testing.assert_array_equal(np.asarray(exe(a, b)), a @ b)


@pytest.mark.slow
def test_cuda_sim_gemm_codegen_fuses_bias_and_relu_into_the_mma_kernel():
    text = CASES["bf16_bias_relu"].replace(', backend_config={"__hlocc_gemm":{}}', "")
    module = parse_hlo(text)
    args = _args(module, 5)
    exe = hlocc.compile(text, "cuda-sim", gemm="codegen")
    assert exe.runner.stats.kernels_by_emitter["gemm"] == 1 and not exe.runner.stats.library_calls
    expected = hlocc.compile(text, "interpreter")(*args)
    np.testing.assert_array_equal(np.asarray(exe(*args), np.float32), np.asarray(expected, np.float32))


_PTX_SCRIPT = """
import json, os, subprocess, tempfile
from hlocc.backends.cuda.ptx import compile_ptx, find_ptxas, validate_ptx
from hlocc.codegen.pipeline import PipelineOptions
from hlocc.hlo.parser import parse_hlo
text = {text!r}
out = {{}}
for arch in ("sm_80", "sm_90"):
    kernel = compile_ptx(parse_hlo(text).entry, arch, options=PipelineOptions(False, None, "kernel", lambda s: None))
    validate_ptx(kernel.ptx, arch)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "k.ptx")
        with open(path, "w") as f:
            f.write(kernel.ptx)
        info = subprocess.run([find_ptxas(), f"-arch={{arch}}", "-v", path, "-o", os.path.join(tmp, "k.cubin")],
                              capture_output=True, text=True).stderr
    out[arch] = dict(ptx=kernel.ptx, threads=kernel.launch_dims.threads_per_block, blocks=kernel.launch_dims.blocks,
                     shared=kernel.shared_bytes, info=info)
print(json.dumps(out))
"""

_CHECKS = """
CHECK: .target {arch}
CHECK: .maxntid 128
CHECK: cp.async.cg.shared.global [%rd{{{{[0-9]+}}}}], [%rd{{{{[0-9]+}}}}], 16, {{{{.+}}}};
CHECK: cp.async.commit_group;
CHECK: cp.async.commit_group;
CHECK: cp.async.wait_group 1;
CHECK-NEXT: bar.sync 0;
CHECK: cp.async.cg.shared.global
CHECK: cp.async.commit_group;
CHECK: ldmatrix.sync.aligned.m8n8.x4.shared.b16
CHECK: ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16
CHECK: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
CHECK: cp.async.wait_group 0;
"""


@pytest.fixture(scope="module")
def mma_ptx() -> dict:
    return ptx_in_subprocess(_PTX_SCRIPT.format(text=_square(200, 304, 96)))


@pytest.mark.skipif(shutil.which("filecheck") is None, reason="the `filecheck` command (PyPI filecheck) is not "
                                                              "installed")
@pytest.mark.parametrize("arch", ["sm_80", pytest.param("sm_90", marks=pytest.mark.slow)])  # second arch: slow run
def test_cuda_schedule_ptx_has_cp_async_ldmatrix_mma_sync_and_ptxas_accepts_it(mma_ptx, arch, tmp_path):
    """The 128 x 128 x 64 schedule with its 3-stage cp.async ring in dynamic shared memory, chosen by
    the GPU target for bf16 on sm_80 and sm_90 (200 x 304 x 96: 2 x 3 blocks, fewer than a wave of
    the wide block's; 2 K blocks; B row-major, so read with ldmatrix .trans)."""
    kernel = mma_ptx[arch]
    assert (kernel["threads"], kernel["blocks"], kernel["shared"]) == (128, 6, 3 * 2 * 128 * 64 * 2)
    assert ".extern .shared .align 16 .b8 hlocc_dynamic_shared[];" in kernel["ptx"]
    checks = tmp_path / "checks.txt"
    checks.write_text(_CHECKS.format(arch=arch))
    result = subprocess.run(["filecheck", str(checks)], input=kernel["ptx"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert kernel["ptx"].count("mma.sync.aligned") >= 64 and "call.uni" not in kernel["ptx"]
    # ptxas -v: the 128 accumulators and two k steps' fragments (the next one's loaded before the
    # current one's mma.sync) take the 255 registers; what spills is a few words (72 bytes on sm_90,
    # as measured on an H100 with it: the fastest of the 96 KiB schedules all the same)
    spilled = re.search(r"(\d+) bytes spill stores", kernel["info"])
    assert spilled is not None and int(spilled.group(1)) <= 128, kernel["info"]


@pytest.mark.slow
def test_gpu_gemm_benchmark_runs_in_simulation():
    """benchmarks/gemm_cuda.py (cuBLAS against the generated kernel on one card) as a smoke test."""
    import pathlib

    script = pathlib.Path(__file__).resolve().parents[3] / "benchmarks" / "gemm_cuda.py"
    result = subprocess.run([sys.executable, str(script), "--backend", "cuda-sim", "--sizes", "40", "--runs", "1",
                             "--epilogue"], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [line for line in result.stdout.splitlines() if line.startswith("bf16 40^3")]
    assert len(rows) == 4 and all(row.endswith("ok") for row in rows if "hlocc codegen" in row), result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("name", ["batched_matmul_bf16_f32acc", "mlp_f32", "attention_f32"])
def test_corpus_dots_on_cuda_sim_with_generated_gemms(name):
    """JAX corpus programs on cuda-sim with `gemm="codegen"` (bf16: the mma.sync kernel with its
    cp.async ring; f32: the SIMT schedule) against XLA:CPU's outputs, within the corpus's tolerance."""
    from corpus import JAX_DIR, jax_cases, require

    require(JAX_DIR)
    case = next(c for c in jax_cases() if c["name"] == name)
    module = parse_hlo((JAX_DIR / f"{name}.hlo").read_text())
    inputs, outputs = np.load(JAX_DIR / f"{name}.in.npz"), np.load(JAX_DIR / f"{name}.out.npz")
    args = [inputs[f"arg{i}"].astype(PRIMITIVE_TYPES[p.shape.element_type.name].dtype)
            for i, p in enumerate(module.entry.parameters)]
    exe = hlocc.compile((JAX_DIR / f"{name}.hlo").read_text(), "cuda-sim", gemm="codegen")
    assert exe.runner.stats.kernels_by_emitter["gemm"] >= 1 and not exe.runner.stats.library_calls
    got = exe(*args)
    got = list(got) if isinstance(got, (list, tuple)) else [got]
    for k, value in enumerate(got):
        np.testing.assert_allclose(np.asarray(value, np.float64), outputs[f"out{k}"].astype(np.float64),
                                   rtol=float(case["rtol"]), atol=float(case["atol"]))


@pytest.mark.parametrize("param,dot_type,threads", [("bf16", "f32", 128), ("f32", "f32", 1), ("f16", "f16", 128)])
def test_the_gpu_schedule_follows_the_staged_parameters(param, dot_type, threads):
    """The kernel stages the fusion's parameters: bf16 parameters widened to an f32 dot inside the
    fusion still take mma.sync (bf16 products are exact in f32), f32 ones the SIMT schedule."""
    from hlocc.codegen.emitters.registry import emit_fusion

    widen = param != dot_type
    text = f"""HloModule m
ENTRY fused {{
  a = {param}[20,24] parameter(0)
  b = {param}[24,16] parameter(1)
  {"ca = f32[20,24] convert(a)" if widen else ""}
  {"cb = f32[24,16] convert(b)" if widen else ""}
  ROOT d = {dot_type}[20,16] dot({"ca, cb" if widen else "a, b"}), {MN}, backend_config={{"__hlocc_gemm":{{}}}}
}}"""
    kernel = emit_fusion(parse_hlo(text).entry, gpu_target(), "main", {})
    assert kernel.launch.threads_per_block == threads


def test_a_ring_past_48_kib_takes_dynamic_shared_memory_and_its_launch_opts_in(monkeypatch, tmp_path):
    """128 x 128 x 64 in 3 stages (96 KiB): the tiles are slices of one `extern .shared` array, the
    driver opts the function in to 96 KiB and every launch passes it (a fake driver records the
    calls) and ptxas takes it; on sm_86 (99 KiB a block) four stages (128 KiB) are a PtxError naming
    the kernel's bytes and the arch's limit."""
    from hlocc.backends.cuda import driver, ptx

    ring = MatmulSchedule(mc=128, nc=128, kc=64, parallel=True, warp_grid=(2, 2), warp_tile=(64, 64), stages=3)
    deeper = MatmulSchedule(mc=128, nc=128, kc=64, parallel=True, warp_grid=(2, 2), warp_tile=(64, 64), stages=4)
    fusion = parse_hlo(_square(128, 128, 256)).entry
    monkeypatch.setattr(ptx, "_CACHE", {})
    monkeypatch.setenv("HLOCC_CACHE_DIR", str(tmp_path))
    with use_schedule(ring):
        kernel = ptx.compile_ptx(fusion, "sm_90")
    assert kernel.shared_bytes == 3 * 256 * 64 * 2 and ptx.dynamic_shared_bytes(kernel.shared_bytes) == 98304
    assert ".extern .shared .align 16 .b8 hlocc_dynamic_shared[];" in kernel.ptx
    assert ".shared .align 16 .b8 shared" not in kernel.ptx  # no static array beside it
    if find_ptxas() is not None:
        ptx.validate_ptx(kernel.ptx, "sm_90")
    with use_schedule(deeper), pytest.raises(ptx.PtxError, match=r"needs 131072 bytes of shared memory; a block of "
                                                                   r"sm_86 has 101376"):
        ptx.compile_ptx(fusion, "sm_86")

    calls = []

    class FakeDriver:
        class CUresult:
            CUDA_SUCCESS = 0

        class CUfunction_attribute:
            CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = "max_dynamic_shared"

        @staticmethod
        def cuModuleLoadData(image):
            return (0, "module")

        @staticmethod
        def cuModuleGetFunction(module, name):
            return (0, "function")

        @staticmethod
        def cuFuncSetAttribute(function, attribute, value):
            calls.append(("attribute", function, attribute, value))
            return (0,)

        @staticmethod
        def cuLaunchKernel(function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
            calls.append(("launch", function, (gx, bx), shared))
            return (0,)

    monkeypatch.setattr(driver, "_driver", lambda: FakeDriver)
    device = object.__new__(driver.CudaDevice)
    device.stream, device._capture = None, threading.local()
    monkeypatch.setattr(driver.CudaDevice, "activate", lambda self: None)
    loaded = device.load(kernel)
    device.launch(loaded, [0x1000, 0x2000, 0x3000])
    assert calls == [("attribute", "function", "max_dynamic_shared", 98304),
                     ("launch", "function", (1, 128), 98304)]
