"""GPU row schedules over a runtime row length (issue 18 item 3, issue 15 item 5): softmax,
layernorm and RMSnorm over [?b, ?n] and a lone row sum over [?b, 4, ?n] are ONE stitch kernel on the
cuda backend (passes/stitch_fusion.py on the GPU), a warp per row (eight rows per block under
`warp_rows`) or, in the `block_row` version where n >= 1025, a block of 512 threads per row, each
thread striding its row with a runtime trip count (codegen/emitters/stitch_gpu.py). Checked on the
SimulatedDevice (the GPU kernels in SIMT simulation, fresh memory poisoned, every access
bounds-checked) against the evaluator, every version forced at every size, and by ptxas."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from _programs import softmax_text
from _ptx_device import ptx_recording_device

import hlocc
from hlocc.analysis.hero import is_stitch_marked
from hlocc.backends.cuda.device import SimulatedDevice
from hlocc.backends.cuda.dynamic import compile_dynamic_module
from hlocc.backends.cuda.ptx import find_ptxas, validate_ptx
from hlocc.codegen.emitters.stitch_gpu import is_block_row_marked
from hlocc.hlo.parser import parse_hlo
from hlocc.passes.pipeline import BACKEND_PIPELINES, PassManager
from hlocc.passes.stitch_fusion import GpuStitchFusion
from hlocc.runtime.speculation import SpeculationOptions, block_row_version

RNG = np.random.default_rng(0)
ROWS = (1, 3, 8)
LENGTHS = (1, 31, 32, 33, 127, 512, 513, 1025)
"""A warp's first stride, one lane short, exactly one, one past; several strides; BladeDISC's 512
± 1; past a warp's row (stitch_gpu.WARP_ROW_ELEMENTS: the `block_row` version's threshold)."""

ADD = """add_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""

LAYERNORM = f"""HloModule layernorm
{ADD}
ENTRY e {{
  x = f32[?b,?n] parameter(0)
  zero = f32[] constant(0)
  s = f32[?b] reduce(x, zero), dimensions={{1}}, to_apply=add_f
  n = s32[] get-dimension-size(x), dimensions={{1}}
  nb = f32[?b] broadcast(f32[] convert(n)), dimensions={{}}
  mean = f32[?b] divide(s, nb)
  mb = f32[?b,?n] broadcast(mean), dimensions={{0}}
  d = f32[?b,?n] subtract(x, mb)
  v = f32[?b] reduce(f32[?b,?n] multiply(d, d), zero), dimensions={{1}}, to_apply=add_f
  eps = f32[?b] broadcast(f32[] constant(1e-5)), dimensions={{}}
  r = f32[?b] rsqrt(f32[?b] add(f32[?b] divide(v, nb), eps))
  rb = f32[?b,?n] broadcast(r), dimensions={{0}}
  ROOT y = f32[?b,?n] multiply(d, rb)
}}
"""

RMSNORM_BF16 = f"""HloModule rmsnorm
{ADD}
ENTRY e {{
  x = bf16[?b,?n] parameter(0)
  xf = f32[?b,?n] convert(x)
  zero = f32[] constant(0)
  s = f32[?b] reduce(f32[?b,?n] multiply(xf, xf), zero), dimensions={{1}}, to_apply=add_f
  n = s32[] get-dimension-size(x), dimensions={{1}}
  nb = f32[?b] broadcast(f32[] convert(n)), dimensions={{}}
  eps = f32[?b] broadcast(f32[] constant(1e-6)), dimensions={{}}
  r = f32[?b] rsqrt(f32[?b] add(f32[?b] divide(s, nb), eps))
  rb = f32[?b,?n] broadcast(r), dimensions={{0}}
  ROOT o = bf16[?b,?n] convert(f32[?b,?n] multiply(xf, rb))
}}
"""

ROW_SUM = f"""HloModule row_sum
{ADD}
ENTRY e {{
  x = f32[?b,4,?n] parameter(0)
  zero = f32[] constant(0)
  ROOT s = f32[?b,4] reduce(x, zero), dimensions={{2}}, to_apply=add_f
}}
"""

PROGRAMS = {  # name: (text, the arguments at (b, n), rtol)
    "softmax": (softmax_text("?n"), lambda b, n: [RNG.standard_normal((b, n)).astype(np.float32)], 1e-5),
    "layernorm": (LAYERNORM, lambda b, n: [RNG.standard_normal((b, n)).astype(np.float32)], 1e-5),
    # bf16 out: a sum in another order may round the result to the neighbouring bf16 (2^-8)
    "rmsnorm_bf16": (RMSNORM_BF16, lambda b, n: [RNG.standard_normal((b, n)).astype(ml_dtypes.bfloat16)], 1e-2),
    "row_sum": (ROW_SUM, lambda b, n: [RNG.standard_normal((b, 4, n)).astype(np.float32)], 1e-5),
}


def compile_on_sim(name: str, mode: str = "on"):
    return compile_dynamic_module(parse_hlo(PROGRAMS[name][0]), SimulatedDevice(fill=0xA5, check_bounds=True),
                                  speculation=SpeculationOptions(mode))


def check_every_size(program, name: str) -> None:
    text, make_args, rtol = PROGRAMS[name]
    reference = hlocc.compile(text, "interpreter")
    for b in ROWS:
        for n in LENGTHS:
            args = make_args(b, n)
            np.testing.assert_allclose(np.asarray(program.run(args), np.float32),
                                       np.asarray(reference(*args), np.float32),
                                       rtol=rtol, atol=1e-5, err_msg=f"{name} at b={b}, n={n}")
    assert program.compilations == 1 and program.symbolic_kernels >= 1 and not program.deferred
    assert program.stats.kernels_by_emitter == {"stitch": 1}, program.stats.to_string()


@pytest.mark.parametrize("name", PROGRAMS)
def test_one_stitch_kernel_runs_every_row_length(name):
    # one compile; each size runs the version its predicates choose
    program = compile_on_sim(name)
    check_every_size(program, name)
    [(_, kernel)] = program.speculated()
    versions = [(v.name, v.predicate, k.launch_dims.threads_per_block) for v, k in kernel.versions]
    if name == "row_sum":  # rows 4*b: four warps' rows per block at any b, no warp_rows version
        assert versions == [("block_row", "n >= 1025", 512), ("generic", "true", 128)]
    else:
        assert versions == [("block_row", "n >= 1025", 512), ("warp_rows", "b mod 8 == 0", 256),
                            ("generic", "true", 32)]
    lines = "\n".join(program.speculation_lines())
    assert "version block_row if n >= 1025: kernel over (b, n), 3 launch(es)" in lines, lines  # n = 1025


@pytest.mark.parametrize("mode", ["force:block_row", "force:generic"])
def test_each_row_form_forced_is_right_at_every_length(mode):
    # `block_row`'s predicate is about speed: forced, a block of 512 threads runs rows of 1 ... 513
    # (most threads past the row's end), and the generic warp form rows of 1025 (33 strides)
    check_every_size(compile_on_sim("softmax", mode), "softmax")


def test_a_forced_lone_reduction_runs_a_block_per_short_row():
    check_every_size(compile_on_sim("row_sum", "force:block_row"), "row_sum")


def test_the_cuda_pipeline_stitches_a_runtime_row():
    # the cpu pipeline stitches a runtime row only in its speculated plan; the GPU's always, and a
    # lone row reduction over a runtime length becomes a stitch fusion of its own
    for name in ("softmax", "row_sum"):
        module = parse_hlo(PROGRAMS[name][0])
        PassManager(BACKEND_PIPELINES["cuda"].optimization, hint={"b": 128, "n": 128}).run(module)
        fusions = [i for i in module.entry.instructions if i.opcode == "fusion"]
        assert [f.attrs["kind"] for f in fusions] == ["kCustom"], module.to_string()
        assert fusions[0].name.startswith("stitch_")
    assert GpuStitchFusion.target == "gpu"


def test_the_block_row_version_keeps_the_stitch_marker():
    # the version's marker is written beside the stitch pass's (KernelVersion.specialize), so the
    # version is still a stitch kernel, in its block form; the warp form's computation has neither
    module = parse_hlo(PROGRAMS["softmax"][0])
    PassManager(BACKEND_PIPELINES["cuda"].optimization, hint={"b": 128, "n": 128}).run(module)
    (fusion,) = [i for i in module.entry.instructions if i.opcode == "fusion"]
    computation = fusion.attrs["calls"]
    version = block_row_version(computation)
    assert str(version) == "block_row if n >= 1025" and not version.assumed
    block = version.specialize(computation)
    configs = {str(i.attrs["backend_config"]) for i in block.instructions if i.opcode == "reduce"}
    assert configs == {'{"__hlocc_stitch":{},"__hlocc_stitch_block_row":{}}'}, configs
    assert is_block_row_marked(block) and not is_block_row_marked(computation)
    assert all(is_stitch_marked(i) for i in block.instructions if i.opcode == "reduce")


PTXAS = find_ptxas()


@pytest.mark.skipif(PTXAS is None, reason="no ptxas: install the CUDA toolkit or the test extra "
                                          "'nvidia-cuda-nvcc-cu12' (or set HLOCC_PTXAS)")
@pytest.mark.parametrize("arch", ["sm_90", pytest.param("sm_80", marks=pytest.mark.slow)])
def test_every_version_is_accepted_by_ptxas(arch):
    # the softmax's three kernels: shuffles in each, a barrier (shared memory across warps) in the
    # block form only; the row length by value after the buffers, a runtime trip count
    device, kernels = ptx_recording_device(arch)
    compile_dynamic_module(parse_hlo(PROGRAMS["softmax"][0]), device)
    assert sorted(k.symbols for k in kernels) == [("b", "n"), ("b", "n"), ("b_8", "n")]
    for kernel in kernels:
        assert "shfl.sync.bfly" in kernel.ptx
        assert ("bar.sync" in kernel.ptx) == (kernel.launch_dims.threads_per_block == 512), kernel.ptx
        validate_ptx(kernel.ptx, arch, PTXAS)
