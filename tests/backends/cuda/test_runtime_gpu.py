"""The `cuda` backend on a real GPU (CudaDevice: PTX through the driver JIT, cuBLAS, device memory).
Every test skips with cuda_available()'s reason where no GPU can be used; test_runtime_sim.py runs
the same paths on the SimulatedDevice everywhere."""

from __future__ import annotations

import numpy as np
import pytest

import hlocc
from corpus import JAX_DIR, jax_cases, require, run_jax_case
from hlocc.backends.cuda.driver import cuda_available

OK, WHY = cuda_available()
pytestmark = pytest.mark.skipif(not OK, reason=f"no GPU: {WHY}")

SMALL = [c for c in jax_cases() if c["perf"] != "yes"]
HOST_OPS: dict[str, list[str]] = {}  # sort and top-k are host library calls, not fallbacks


def test_the_device_is_described():
    from hlocc.backends.cuda.driver import cuda_device

    device = cuda_device()
    assert device.arch.startswith("sm_") and device.target.num_cores > 0
    assert device.name.startswith("cuda:0 ")
    # every device of CUDA 11.2 and later has memory pools: runs allocate stream-ordered, no cuMemFree
    assert device.pool is not None, device.allocator


def test_jax_gpu_arrays_go_in_and_come_back_without_a_copy():
    jax = pytest.importorskip("jax")
    gpus = [d for d in jax.devices() if d.platform == "gpu"]
    if not gpus:
        pytest.skip("jax has no GPU here")
    text = """HloModule m
ENTRY e {
  x = f32[4096] parameter(0)
  ROOT y = f32[4096] multiply(x, x)
}"""
    exe = hlocc.compile(text, backend="cuda")
    x = jax.device_put(np.arange(4096, dtype=np.float32), gpus[0])
    out = exe(x, return_device_arrays=True)
    run = exe.runner.last_run
    assert run.arguments_in_place == 1 and run.uploaded_bytes == 0 and run.downloaded_bytes == 0
    y = jax.dlpack.from_dlpack(out)
    assert y.devices() == {gpus[0]}
    np.testing.assert_array_equal(np.asarray(y), np.arange(4096, dtype=np.float32) ** 2)
    for _ in range(3):  # later runs reuse the pool's memory
        y = jax.dlpack.from_dlpack(exe(y, return_device_arrays=True))
    expected = np.arange(4096, dtype=np.float32)
    for _ in range(4):
        expected = expected * expected
    np.testing.assert_array_equal(np.asarray(y), expected)


@pytest.mark.parametrize("case", SMALL, ids=lambda c: c["name"])
def test_jax_case_on_the_gpu_matches_xla_cpu(case):
    require(JAX_DIR)
    exe = run_jax_case(case, JAX_DIR, "cuda")
    assert sorted(op for _, op, _ in exe.runner.stats.host_ops) == HOST_OPS.get(case["name"], [])


def test_gemm_runs_in_cublas():
    text = """HloModule m
ENTRY e {
  a = f32[3,64,32]{1,2,0} parameter(0)
  b = f32[3,32,48] parameter(1)
  ROOT d = f32[3,64,48] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
}"""
    exe = hlocc.compile(text, backend="cuda", hlo_passes=False)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 64, 32)).astype(np.float32), rng.standard_normal((3, 32, 48)).astype(np.float32)
    np.testing.assert_allclose(exe(a, b), a @ b, rtol=1e-4, atol=1e-4)
    if not exe.runner.device.gemm_unavailable:
        assert exe.runner.last_run.device_gemms == 1


def test_results_stay_on_the_gpu_and_cross_dlpack_without_a_copy():
    from hlocc.backends.cuda.dlpack import KDLCUDA

    text = """HloModule m
ENTRY e {
  x = f32[1024] parameter(0)
  ROOT y = f32[1024] multiply(x, x)
}"""
    exe = hlocc.compile(text, backend="cuda")
    x = np.arange(1024, dtype=np.float32)
    out = exe(x, return_device_arrays=True)
    assert out.__dlpack_device__()[0] == KDLCUDA
    assert out.__cuda_array_interface__["data"][0] == out.ptr
    np.testing.assert_array_equal(out.numpy(), x * x)
    again = exe(out, return_device_arrays=True)  # a device array in: used in place
    assert exe.runner.last_run.arguments_in_place == 1 and exe.runner.last_run.uploaded_bytes == 0
    np.testing.assert_array_equal(np.asarray(again), (x * x) ** 2)
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        t = torch.from_dlpack(out)
        assert t.data_ptr() == out.ptr and t.is_cuda
        np.testing.assert_array_equal(exe(t * 2).astype(np.float32), (2 * x * x) ** 2)


def test_one_compile_runs_every_batch_size_on_the_gpu():
    # backends/cuda/dynamic.py: the symbolic kernels' PTX takes the dims by value, grids per binding
    text = """HloModule softmax
max_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
add_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[?b,?n] parameter(0)
  ninf = f32[] constant(-inf)
  mx = f32[?b] reduce(x, ninf), dimensions={1}, to_apply=max_f
  mb = f32[?b,?n] broadcast(mx), dimensions={0}
  ex = f32[?b,?n] exponential(f32[?b,?n] subtract(x, mb))
  zero = f32[] constant(0)
  s = f32[?b] reduce(ex, zero), dimensions={1}, to_apply=add_f
  sb = f32[?b,?n] broadcast(s), dimensions={0}
  ROOT r = f32[?b,?n] divide(ex, sb)
}"""
    exe = hlocc.compile(text, backend="cuda")
    reference = hlocc.compile(text, backend="interpreter")
    rng = np.random.default_rng(0)
    for b, n in [(0, 5), (1, 1), (7, 127), (8, 127), (257, 4096), (3, 1000)]:
        x = rng.standard_normal((b, n)).astype(np.float32)
        np.testing.assert_allclose(exe(x), reference(x), rtol=1e-5, atol=1e-6, err_msg=f"b={b}, n={n}")
    assert exe.compilations == 1 and not exe.program.deferred and exe.plan_builds == 1
