"""The `cuda` backend's runtime on the SimulatedDevice (`cuda-sim`): whole programs go through the
same path as on a GPU — thunks, device buffers, transfers, launches with the GPU's launch
dimensions (the kernels in SIMT simulation), gemm plans for cuBLAS (evaluated by numpy) and host
fallbacks through device reads and writes — and must give XLA's and the evaluator's answers."""

from __future__ import annotations

import numpy as np
import pytest

import hlocc
from corpus import GPU_NUMERICS_TOLERANCE, JAX_DIR, jax_cases, require, run_jax_case
from hlocc.backends.cuda.device import SimulatedDevice
from hlocc.backends.cuda.executable import compile_module
from hlocc.backends.cuda.library import gemm_numpy, plan_gemm
from hlocc.errors import ArgumentError
from hlocc.hlo.parser import parse_hlo
from hlocc.runtime.thunks import aligned_bytes

CASES = {c["name"]: c for c in jax_cases()}
# A representative subset for the default run: elementwise (bf16), reductions, transposes, in-place
# updates, control flow, gemms (batched, bf16 with f32 accumulation), convolution, host fallbacks.
QUICK = ["gelu_bias_bf16", "softmax_logsoftmax_f32", "transpose_2d_3d", "kv_cache_update", "sort_topk_argsort",
         "while_bisection", "cond_predicate_tuple", "mlp_f32", "batched_matmul_bf16_f32acc", "conv2d_nchw_maxpool"]
HOST_OPS: dict[str, list[str]] = {}  # sort and top-k are host library calls, not fallbacks
LIBRARY_CALLS = {"sort_topk_argsort": {"sort (host)": 2, "top-k (host)": 1}}

POISON = 0xA5


def compile_sim(text: str, hlo_passes: bool = True, **device_options) -> hlocc.Executable:
    """Compile for a SimulatedDevice whose fresh allocations start as POISON bytes."""
    module = parse_hlo(text)
    runner = compile_module(parse_hlo(text), SimulatedDevice(fill=POISON, **device_options), hlo_passes=hlo_passes)
    return hlocc.Executable(module, "cuda-sim", runner=runner)


def interpret(text: str, *args):
    return hlocc.compile(text, backend="interpreter")(*args)


@pytest.mark.parametrize("name", QUICK)
def test_jax_case_on_cuda_sim_matches_xla_cpu(name):
    require(JAX_DIR)
    exe = run_jax_case(CASES[name], JAX_DIR, "cuda-sim")
    stats = exe.runner.stats
    assert stats.device.startswith("simulated sm_90"), stats.to_string()
    assert sorted(op for _, op, _ in stats.host_ops) == HOST_OPS.get(name, []), stats.to_string()
    for call, count in LIBRARY_CALLS.get(name, {}).items():
        assert stats.library_calls[call] == count, stats.to_string()
    run = exe.runner.last_run
    assert run.launches + run.device_gemms + run.host_library_calls > 0, run.to_string()


@pytest.mark.slow
@pytest.mark.parametrize("case", [c for c in CASES.values() if c["perf"] != "yes"], ids=lambda c: c["name"])
def test_every_jax_case_on_cuda_sim_matches_xla_cpu(case):
    require(JAX_DIR)
    exe = run_jax_case(case, JAX_DIR, "cuda-sim")
    assert sorted(op for _, op, _ in exe.runner.stats.host_ops) == HOST_OPS.get(case["name"], [])


@pytest.mark.slow
@pytest.mark.parametrize("case", [c for c in CASES.values() if c["perf"] == "yes"], ids=lambda c: c["name"])
def test_jax_perf_case_on_cuda_sim_matches_xla_cpu(case, perf_dir):
    case = {**case, **GPU_NUMERICS_TOLERANCE.get(case["name"], {})}
    exe = run_jax_case(case, perf_dir, "cuda-sim")
    assert not exe.runner.stats.host_ops


# -- what a run moves ----------------------------------------------------------------------------

ELEMENTWISE = """HloModule m
ENTRY e {
  x = f32[256,64] parameter(0)
  y = f32[256,64] parameter(1)
  ROOT z = f32[256,64] multiply(x, y)
}"""


def test_arguments_in_device_memory_are_used_in_place_and_only_outputs_come_back():
    exe = compile_sim(ELEMENTWISE)
    x = aligned_bytes(256 * 64 * 4).view(np.float32).reshape(256, 64)
    x[...] = np.arange(x.size, dtype=np.float32).reshape(x.shape)
    y = np.full((256, 64), 0.5, np.float32)
    y_aligned = aligned_bytes(y.nbytes).view(np.float32).reshape(y.shape)
    y_aligned[...] = y
    got = exe(x, y_aligned)
    np.testing.assert_array_equal(got, x * 0.5)
    run = exe.runner.last_run
    assert (run.arguments_in_place, run.uploaded_bytes) == (2, 0), run.to_string()
    assert (run.allocations, run.allocated_bytes) == (1, 256 * 64 * 4), run.to_string()
    assert (run.downloaded_bytes, run.host_reads, run.launches) == (256 * 64 * 4, 1, 1), run.to_string()


def test_an_argument_in_another_layout_is_uploaded_in_the_parameters_layout():
    text = ELEMENTWISE.replace("x = f32[256,64] parameter(0)", "x = f32[256,64]{0,1} parameter(0)")
    exe = compile_sim(text)
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((2, 256, 64)).astype(np.float32)
    np.testing.assert_array_equal(exe(x, y), x * y)
    assert exe.runner.last_run.uploaded_bytes >= x.nbytes  # x transposed into {0,1} order


def test_a_parameter_the_program_writes_is_copied_and_the_callers_array_kept():
    text = """HloModule m, input_output_alias={ {}: (0, {}, must-alias) }
ENTRY e {
  x = f32[1024] parameter(0)
  ROOT y = f32[1024] add(x, x)
}"""
    exe = compile_sim(text)
    x = aligned_bytes(4096).view(np.float32)
    x[...] = np.arange(1024)
    before = x.copy()
    np.testing.assert_array_equal(exe(x), before * 2)
    np.testing.assert_array_equal(x, before)
    assert exe.runner.last_run.arguments_in_place == 0


def test_constants_are_uploaded_once(monkeypatch):
    monkeypatch.setenv("HLOCC_CUDA_GRAPHS", "0")  # eager runs (a replay keeps every buffer: test_command_buffer.py)
    text = """HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  c = f32[4] constant({1, 2, 3, 4})
  ROOT y = f32[4] multiply(x, c)
}"""
    exe = compile_sim(text)
    x = np.ones(4, np.float32)
    for _ in range(2):
        np.testing.assert_array_equal(exe(x), [1, 2, 3, 4])
    assert exe.runner.last_run.allocations == 1  # the output; the constant stayed on the device


# -- control flow and host fallbacks on device memory ---------------------------------------------

WHILE = """HloModule m
cond {
  p = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  v = f32[8] get-tuple-element(p), index=1
  one = s32[] constant(1)
  two = f32[] constant(2)
  b = f32[8] broadcast(two), dimensions={}
  i1 = s32[] add(i, one)
  v2 = f32[8] multiply(v, b)
  ROOT t = (s32[], f32[8]) tuple(i1, v2)
}
ENTRY e {
  x = f32[8] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[8]) tuple(zero, x)
  w = (s32[], f32[8]) while(init), condition=cond, body=body
  ROOT r = f32[8] get-tuple-element(w), index=1
}"""


def test_while_reads_its_predicate_from_device_memory_each_iteration():
    exe = compile_sim(WHILE)
    x = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(exe(x), x * 32)
    assert not exe.runner.stats.host_ops, exe.runner.stats.to_string()
    run = exe.runner.last_run
    assert run.host_reads == 6 + 1, run.to_string()  # 6 predicates (5 true, 1 false) and the output
    assert run.host_writes == 0 and run.launches >= 10, run.to_string()


CONDITIONAL = """HloModule m
double {
  p = f32[4] parameter(0)
  ROOT r = f32[4] add(p, p)
}
negate {
  p = f32[4] parameter(0)
  ROOT r = f32[4] negate(p)
}
last {
  p = f32[4] parameter(0)
  ROOT r = f32[4] exponential(p)
}
ENTRY e {
  k = s32[] parameter(0)
  x = f32[4] parameter(1)
  ROOT c = f32[4] conditional(k, x, x, x), branch_computations={double, negate, last}
}"""


@pytest.mark.parametrize("index", [0, 1, 2, 7, -1])
def test_conditional_selects_its_branch_from_device_memory(index):
    exe = compile_sim(CONDITIONAL)
    x = np.array([0.5, -1, 2, 3], np.float32)
    got = exe(np.int32(index), x)
    np.testing.assert_allclose(got, interpret(CONDITIONAL, np.int32(index), x), rtol=1e-6)
    expected = {0: x + x, 1: -x}.get(index, np.exp(x))
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_a_host_library_call_copies_its_operands_to_the_host_and_its_result_back():
    text = """HloModule m
cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT lt = pred[] compare(a, b), direction=LT
}
ENTRY e {
  x = f32[64] parameter(0)
  y = f32[64] negate(x)
  ROOT s = f32[64] sort(y), dimensions={0}, to_apply=cmp
}"""
    exe = compile_sim(text)
    x = np.random.default_rng(1).standard_normal(64).astype(np.float32)
    np.testing.assert_array_equal(exe(x), interpret(text, x))
    assert exe.runner.stats.host_ops == [] and exe.runner.stats.library_calls == {"sort (host)": 1}
    run = exe.runner.last_run
    assert (run.host_writes, run.uploaded_bytes) == (1, 256), run.to_string()
    assert run.host_reads == 2, run.to_string()  # the sort's operand, then the output


# -- gemms -------------------------------------------------------------------------------------------

def _dot(lhs: str, rhs: str, out: str, dims: str) -> str:
    return f"""HloModule m
ENTRY e {{
  a = {lhs} parameter(0)
  b = {rhs} parameter(1)
  ROOT d = {out} dot(a, b), {dims}
}}"""


MATMUL = "lhs_contracting_dims={1}, rhs_contracting_dims={0}"
BATCHED = "lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}"
GEMMS = {  # every storage order of the operands and the output maps onto one strided batched gemm
    "nn_rowmajor_out": _dot("f32[24,40]{1,0}", "f32[40,16]{1,0}", "f32[24,16]{1,0}", MATMUL),
    "nn_colmajor_out": _dot("f32[24,40]{1,0}", "f32[40,16]{1,0}", "f32[24,16]{0,1}", MATMUL),
    "tn": _dot("f32[24,40]{0,1}", "f32[40,16]{1,0}", "f32[24,16]{1,0}", MATMUL),
    "nt": _dot("f32[24,40]{1,0}", "f32[40,16]{0,1}", "f32[24,16]{1,0}", MATMUL),
    "tt_colmajor_out": _dot("f32[24,40]{0,1}", "f32[40,16]{0,1}", "f32[24,16]{0,1}", MATMUL),
    "batched": _dot("f32[3,24,40]", "f32[3,40,16]", "f32[3,24,16]", BATCHED),
    "batched_transposed": _dot("f32[3,24,40]{1,2,0}", "f32[3,40,16]{1,2,0}", "f32[3,24,16]{1,2,0}", BATCHED),
    "matrix_vector": _dot("f32[24,40]", "f32[40]", "f32[24]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    "two_contracting": _dot("f32[6,4,5]", "f32[4,5,7]", "f32[6,7]",
                            "lhs_contracting_dims={1,2}, rhs_contracting_dims={0,1}"),
    "bf16_to_f32": _dot("bf16[24,40]", "bf16[40,16]", "f32[24,16]", MATMUL),
    "f64": _dot("f64[24,40]", "f64[40,16]", "f64[24,16]", MATMUL),
    "c64": _dot("c64[8,5]", "c64[5,3]", "c64[8,3]", MATMUL),
}


def _random(shape, rng):
    if shape.dtype.kind == "c":
        return (rng.standard_normal(shape.dims) + 1j * rng.standard_normal(shape.dims)).astype(shape.dtype)
    return rng.standard_normal(shape.dims).astype(shape.dtype)


@pytest.mark.parametrize("name", GEMMS)
def test_gemm_runs_as_one_strided_batched_gemm_on_the_device(name):
    text = GEMMS[name]
    exe = compile_sim(text, hlo_passes=False)
    rng = np.random.default_rng(2)
    args = [_random(p.shape, rng) for p in exe.module.entry.parameters]
    got = exe(*args)
    np.testing.assert_allclose(got, interpret(text, *args), rtol=2e-5, atol=2e-5)
    assert dict(exe.runner.stats.library_calls) == {"gemm": 1}, exe.runner.stats.to_string()
    run = exe.runner.last_run
    assert (run.device_gemms, run.host_library_calls) == (1, 0), run.to_string()


@pytest.mark.parametrize("text, why", [
    (_dot("s32[8,5]", "s32[5,3]", "s32[8,3]", MATMUL), "integers"),
    (_dot("f32[24,3,40]", "f32[3,40,16]", "f32[3,24,16]",
          "lhs_batch_dims={1}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}"),
     "a batch dim that is not outermost"),
])
def test_a_dot_no_strided_gemm_computes_runs_on_the_host(text, why):
    exe = compile_sim(text, hlo_passes=False)
    rng = np.random.default_rng(3)
    args = [(rng.integers(-5, 5, p.shape.dims).astype(p.shape.dtype) if p.shape.dtype.kind == "i"
             else _random(p.shape, rng)) for p in exe.module.entry.parameters]
    np.testing.assert_allclose(exe(*args), interpret(text, *args), rtol=2e-5, atol=2e-5)
    assert dict(exe.runner.stats.library_calls) == {"gemm (host)": 1}, why
    assert exe.runner.last_run.host_library_calls == 1


def test_gemm_plan_of_a_row_major_product_is_the_transposed_product_in_column_major():
    """C = A·B with everything row-major is cuBLAS's Cᵀ = Bᵀ·Aᵀ, no operand transposed."""
    module = parse_hlo(GEMMS["nn_rowmajor_out"])
    a, b = (p.shape for p in module.entry.parameters)
    plan = plan_gemm(a, b, module.entry.root.shape, ((1,), (0,), (), ()))
    assert (plan.p_is_lhs, plan.trans_p, plan.trans_q) == (False, False, False)
    assert (plan.m, plan.n, plan.k, plan.ldp, plan.ldq, plan.ldc) == (16, 24, 40, 16, 40, 16)
    lhs = np.arange(24 * 40, dtype=np.float32).reshape(24, 40) / 100
    rhs = np.arange(40 * 16, dtype=np.float32).reshape(40, 16) / 100
    out = np.zeros((24, 16), np.float32)
    gemm_numpy(plan, out.ctypes.data, lhs.ctypes.data, rhs.ctypes.data)
    np.testing.assert_allclose(out, lhs @ rhs, rtol=1e-5)


def test_convolution_runs_as_im2col_kernels_and_a_device_gemm():
    text = """HloModule m
ENTRY e {
  x = f32[1,6,6,2] parameter(0)
  k = f32[3,3,2,4] parameter(1)
  ROOT c = f32[1,4,4,4] convolution(x, k), window={size=3x3}, dim_labels=b01f_01io->b01f
}"""
    exe = compile_sim(text)
    rng = np.random.default_rng(4)
    x, k = rng.standard_normal((1, 6, 6, 2)).astype(np.float32), rng.standard_normal((3, 3, 2, 4)).astype(np.float32)
    np.testing.assert_allclose(exe(x, k), interpret(text, x, k), rtol=1e-5, atol=1e-5)
    assert dict(exe.runner.stats.library_calls) == {"gemm": 1}
    assert exe.runner.stats.kernels >= 1 and not exe.runner.stats.host_ops
    run = exe.runner.last_run
    assert (run.device_gemms, run.host_library_calls) == (1, 0)


def test_a_convolution_with_batch_groups_runs_on_the_host_and_says_so():
    text = """HloModule m
ENTRY e {
  a = f32[4,5,2] parameter(0)
  b = f32[3,2,2] parameter(1)
  ROOT c = f32[2,3,2] convolution(a, b), window={size=3}, dim_labels=b0f_0io->b0f, batch_group_count=2
}"""
    exe = compile_sim(text)
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((4, 5, 2)).astype(np.float32), rng.standard_normal((3, 2, 2)).astype(np.float32)
    np.testing.assert_allclose(exe(a, b), interpret(text, a, b), rtol=1e-5, atol=1e-5)
    assert dict(exe.runner.stats.library_calls) == {"convolution (host)": 1}
    assert "library calls: convolution (host) 1" in exe.runner.stats.to_string()
    assert exe.runner.last_run.host_library_calls == 1


# -- errors ------------------------------------------------------------------------------------------

def test_wrong_argument_shape_or_dtype_is_an_argument_error():
    exe = hlocc.compile(ELEMENTWISE, backend="cuda-sim")
    with pytest.raises(ArgumentError, match=r"argument 1: expected shape f32\[256,64\], got an array of shape \[64, 256\]"):
        exe(np.zeros((256, 64), np.float32), np.zeros((64, 256), np.float32))
    with pytest.raises(ArgumentError, match=r"argument 0: expected dtype f32 \(float32\), got float64"):
        exe(np.zeros((256, 64)), np.zeros((256, 64), np.float32))
    with pytest.raises(ArgumentError, match="takes 2 arguments, got 1"):
        exe(np.zeros((256, 64), np.float32))


def test_cuda_backend_without_a_gpu_names_the_reason(monkeypatch):
    from hlocc.backends.cuda import driver

    monkeypatch.setattr(driver, "cuda_available", lambda: (False, "no CUDA driver (libcuda.so.1 not found)"))
    with pytest.raises(hlocc.UnsupportedError) as error:
        hlocc.compile(ELEMENTWISE, backend="cuda")
    assert str(error.value) == ("backend 'cuda': no CUDA driver (libcuda.so.1 not found); use --backend cpu, or "
                                "--backend cuda-sim to run the GPU kernels in simulation")


def test_cli_cuda_without_a_gpu_prints_one_line_and_exits_1(monkeypatch, tmp_path, capsys):
    from hlocc.backends.cuda import driver
    from hlocc.cli import main

    monkeypatch.setattr(driver, "cuda_available", lambda: (False, "no CUDA device"))
    path = tmp_path / "m.hlo"
    path.write_text(ELEMENTWISE)
    assert main(["run", str(path), "--backend", "cuda"]) == 1
    err = capsys.readouterr().err
    assert err == ("hlocc: error: backend 'cuda': no CUDA device; use --backend cpu, or --backend cuda-sim to run "
                   "the GPU kernels in simulation\n")


def test_cli_runs_cuda_sim_with_stats(tmp_path, capsys):
    from hlocc.cli import main

    path = tmp_path / "m.hlo"
    path.write_text(WHILE)
    inputs = tmp_path / "in.npz"
    np.savez(inputs, arg0=np.arange(8, dtype=np.float32))
    out = tmp_path / "out.npz"
    assert main(["run", str(path), "--backend", "cuda-sim", "--stats", "--inputs", str(inputs),
                 "--output", str(out)]) == 0
    text = capsys.readouterr().out
    assert "device: simulated sm_90" in text and "host fallbacks: 0" in text
    assert "device run: allocations" in text and "host reads 7" in text
    np.testing.assert_array_equal(np.load(out)["out0"], np.arange(8) * 32)


def test_cuda_available_gives_a_reason_when_it_is_not():
    from hlocc.backends.cuda.driver import cuda_available

    ok, why = cuda_available()
    if ok:
        pytest.skip(f"a GPU is here ({why}): test_runtime_gpu.py runs on it")
    assert why.startswith(("no CUDA driver", "the package cuda-bindings", "the CUDA driver", "no CUDA device")), why


def test_simulated_device_can_validate_every_kernel_with_ptxas():
    from hlocc.backends.cuda import ptx

    try:
        ptx.compile_ptx(parse_hlo(ELEMENTWISE).entry, "sm_90")
    except NotImplementedError:
        pytest.skip("backends/cuda/ptx.py does not compile PTX yet")
    except hlocc.HloError:
        pass
    if ptx.find_ptxas() is None:
        pytest.skip("no ptxas installed")
    exe = compile_sim(ELEMENTWISE, validate_ptx=True)
    x = np.ones((256, 64), np.float32)
    np.testing.assert_array_equal(exe(x, x), x)
