"""Dynamic shapes on the cuda backend (issue 15, issue 18 item 3's GPU forms): one compile of a
module with symbolic dimensions runs every size on a device (backends/cuda/dynamic.py), its
kernels the GPU form of the emitters compiled once with runtime dims. Checked without a GPU: on
the SimulatedDevice (`cuda-sim`: the same GPU kernels in SIMT simulation, fresh device memory
poisoned, every access bounds-checked where asked) against the evaluator and jax.jit, and the PTX
of the same symbolic kernels assembled by ptxas for sm_80 and sm_90."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from _programs import MLP, softmax_text
from _ptx_device import ptx_recording_device

import hlocc
from hlocc.analysis.launch import LaunchDims
from hlocc.backends.cuda.device import SimulatedDevice
from hlocc.backends.cuda.dynamic import DeviceDynamicProgram, compile_dynamic_module
from hlocc.backends.cuda.ptx import PtxError, compile_ptx, find_ptxas, validate_ptx
from hlocc.errors import ArgumentError
from hlocc.hlo.parser import parse_hlo
from hlocc.runtime.speculation import SpeculationOptions
from hlocc.runtime.thunks import KernelThunk

RNG = np.random.default_rng(0)
SIZES = [0, 1, 2, 7, 13, 130]  # 0, 1, primes and one past a block of 128 threads

LAYERNORM = """HloModule layernorm
add_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[?b,96] parameter(0)
  zero = f32[] constant(0)
  s = f32[?b] reduce(x, zero), dimensions={1}, to_apply=add_f
  n = f32[] constant(96)
  nb = f32[?b] broadcast(n), dimensions={}
  mean = f32[?b] divide(s, nb)
  mb = f32[?b,96] broadcast(mean), dimensions={0}
  d = f32[?b,96] subtract(x, mb)
  sq = f32[?b,96] multiply(d, d)
  v = f32[?b] reduce(sq, zero), dimensions={1}, to_apply=add_f
  var = f32[?b] divide(v, nb)
  eps = f32[] constant(1e-5)
  eb = f32[?b] broadcast(eps), dimensions={}
  r = f32[?b] rsqrt(f32[?b] add(var, eb))
  rb = f32[?b,96] broadcast(r), dimensions={0}
  ROOT y = f32[?b,96] multiply(d, rb)
}
"""

SAME_ROWS = """HloModule same
ENTRY e {
  x = f32[?b,4] parameter(0)
  y = f32[?b,4] parameter(1)
  ROOT s = f32[?b,4] add(x, y)
}
"""

W1 = RNG.standard_normal((16, 32)).astype(np.float32)
W2 = RNG.standard_normal((32, 8)).astype(np.float32)
PROGRAMS = {  # name: (text, the arguments at size n)
    "softmax_127": (softmax_text("127"), lambda n: [RNG.standard_normal((n, 127)).astype(np.float32)]),
    "softmax_4096": (softmax_text("4096"), lambda n: [RNG.standard_normal((n, 4096)).astype(np.float32)]),
    "softmax_bn": (softmax_text("?n"), lambda n: [RNG.standard_normal((n, 2 * n + 1)).astype(np.float32)]),
    "layernorm": (LAYERNORM, lambda n: [RNG.standard_normal((n, 96)).astype(np.float32)]),
    "mlp": (MLP, lambda n: [RNG.standard_normal((n, 16)).astype(np.float32), W1, W2]),
}

ATOL = {"mlp": 1e-5}
"""The MLP's sums of 16 and 32 products of magnitude ~1 round differently in another order
(f32 epsilon × terms × their size: ~1e-5 absolute where a result cancels to ~0.05)."""


def check_one_compile(exe: hlocc.Executable) -> DeviceDynamicProgram:
    """One plan, every fusion a kernel with runtime dims compiled once, none per size."""
    program = exe.program
    assert isinstance(program, DeviceDynamicProgram), exe.plan_reason
    assert exe.plan_builds == 1 and not exe.specializations and not program.deferred, program.fallbacks()
    assert exe.compilations == 1 and program.symbolic_kernels >= 1
    assert "0 compiled per size" in exe.stats_text() and "simulated sm_90" in exe.stats_text()
    return program


def check_sizes(name: str, sizes: list[int], **options) -> hlocc.Executable:
    text, make_args = PROGRAMS[name]
    exe = hlocc.compile(text, "cuda-sim", **options)
    reference = hlocc.compile(text, "interpreter")
    for n in sizes:
        args = make_args(n)
        np.testing.assert_allclose(exe(*args), reference(*args), rtol=1e-5, atol=ATOL.get(name, 1e-6),
                                   err_msg=f"{name} at {n}")
        assert exe.compilations == 1, f"{name}: a compilation at size {n}"
    check_one_compile(exe)
    return exe


@pytest.mark.parametrize("name", ["softmax_127", "mlp"])
def test_one_compile_runs_sizes_zero_one_and_primes_on_cuda_sim(name):
    exe = check_sizes(name, SIZES)
    run = exe.program.last_run
    assert run.launches >= 1 and run.arguments_in_place >= 1, run.to_string()
    if name == "mlp":  # the gemms take the call's M: plans for cuBLAS (numpy here) at every size
        assert run.device_gemms == 2 and run.host_library_calls == 0, run.to_string()
    else:  # a static row over a runtime row count: one stitch kernel, a warp per row
        assert exe.program.stats.kernels_by_emitter == {"stitch": 1}


@pytest.mark.slow
@pytest.mark.parametrize("name", PROGRAMS)
def test_size_sweep_bounds_checked_on_cuda_sim(name):
    # check_bounds: each simulated kernel checks every access against its buffer (BoundsCheckError)
    check_sizes(name, [0, 1, 2, 3, 5, 31, 127, 257], check_bounds=True)


def test_a_runtime_row_length_runs_one_stitch_kernel():
    # the GPU form keeps no row on chip: a runtime row length is stitched at every size, a warp per
    # row (tests/backends/cuda/test_dynamic_rows.py has the row forms and their versions)
    exe = check_sizes("softmax_bn", [0, 1, 6])
    kernels = [t.kernel for t in exe.program.template.walk() if isinstance(t, KernelThunk)]
    assert len(kernels) == 1 and kernels[0].symbols == ("b", "n")
    assert exe.program.stats.kernels_by_emitter == {"stitch": 1}


def test_sizes_that_break_the_shapes_are_argument_errors():
    exe = hlocc.compile(MLP, "cuda-sim")
    with pytest.raises(ArgumentError, match=r"expected shape f32\[\?b,16\], got an array of shape \[3, 15\]"):
        exe(np.ones((3, 15), np.float32), W1, W2)
    with pytest.raises(ArgumentError, match=r"got an array of shape \[3, 16, 1\]"):
        exe(np.ones((3, 16, 1), np.float32), W1, W2)
    # one variable, two arguments: the host shape function names it and both values
    both = hlocc.compile(SAME_ROWS, "cuda-sim")
    with pytest.raises(ArgumentError, match="argument 1 dimension 0: size 5 does not match 'b' = 3"):
        both(np.ones((3, 4), np.float32), np.ones((5, 4), np.float32))
    np.testing.assert_array_equal(both(np.ones((3, 4), np.float32), np.ones((3, 4), np.float32)),
                                  np.full((3, 4), 2, np.float32))


def test_poisoned_device_memory_never_reaches_the_outputs():
    # fresh device allocations start as 0xA5 bytes: an element no kernel wrote would show
    text, make_args = PROGRAMS["layernorm"]
    program = compile_dynamic_module(parse_hlo(text), SimulatedDevice(fill=0xA5))
    reference = hlocc.compile(text, "interpreter")
    for n in (1, 9):
        args = make_args(n)
        np.testing.assert_allclose(program.run(args), reference(*args), rtol=1e-5, atol=1e-5)
    assert program.compilations == 1 and len(program._bound) == 2


PTXAS = find_ptxas()


@pytest.mark.skipif(PTXAS is None, reason="no ptxas: install the CUDA toolkit or the test extra "
                                          "'nvidia-cuda-nvcc-cu12' (or set HLOCC_PTXAS)")
@pytest.mark.parametrize("arch", ["sm_90", pytest.param("sm_80", marks=pytest.mark.slow)])
def test_the_symbolic_kernels_ptx_is_accepted_by_ptxas(arch):
    # every kernel (and version) of the softmax over [b, 127] (a stitch kernel: warp rows), and in
    # the slow run over [b, n] (loop kernels over two variables) and the layernorm's, compiled once
    # for every size: dims by value after the buffers (ptx.py), assembled by ptxas
    device, kernels = ptx_recording_device(arch)
    for name in ("softmax_127",) + (("softmax_bn", "layernorm") if arch == "sm_80" else ()):
        compile_dynamic_module(parse_hlo(PROGRAMS[name][0]), device)
    assert {k.symbols for k in kernels} >= {("b",), ("b_8",)} | ({("b", "n")} if arch == "sm_80" else set())
    for kernel in kernels:
        assert f".param .u64 {kernel.name}_param_{len(kernel.param_shapes) + len(kernel.output_shapes)}" \
            in kernel.ptx
        validate_ptx(kernel.ptx, arch, PTXAS)


def test_a_launch_evaluates_the_grid_at_the_binding():
    program = compile_dynamic_module(parse_hlo(PROGRAMS["softmax_127"][0]), SimulatedDevice())
    [(_, kernel)] = program.speculated()
    [warp_rows, generic] = [compile_ptx(k.computation, "sm_90") for _, k in kernel.versions]
    assert generic.symbols == ("b",) and generic.launch_at((0,)) is None  # no row: nothing to launch
    assert generic.launch_at((5,)) == LaunchDims(32, 5)  # a warp's row per block
    assert warp_rows.symbols == ("b_8",) and warp_rows.launch_at((3,)) == LaunchDims(256, 3)  # 24 rows
    with pytest.raises(PtxError, match="takes the values of 1 dimension variable"):
        generic.launch_at(())


def test_the_launch_version_runs_eight_rows_per_block_where_they_divide_the_rows():
    # runtime/speculation.py `warp_rows`: b mod 8 == 0 runs 8 warps' rows per block of 256 threads,
    # the generic kernel a row per block of 32; each forced, and chosen, at sizes around 8
    text, make_args = PROGRAMS["softmax_127"]
    reference = hlocc.compile(text, "interpreter")
    chosen = compile_dynamic_module(parse_hlo(text), SimulatedDevice(fill=0xA5))
    forced = compile_dynamic_module(parse_hlo(text), SimulatedDevice(fill=0xA5),
                                    speculation=SpeculationOptions("force:warp_rows"))
    generic = compile_dynamic_module(parse_hlo(text), SimulatedDevice(fill=0xA5),
                                     speculation=SpeculationOptions("force:generic"))
    [(_, kernel)] = chosen.speculated()
    assert [(v.name, v.predicate, k.launch_dims.threads_per_block) for v, k in kernel.versions] == [
        ("warp_rows", "b mod 8 == 0", 256), ("generic", "true", 32)]
    for n in (0, 1, 7, 8, 9, 16, 24):
        args = make_args(n)
        want = reference(*args)
        for program in (chosen, generic) + ((forced,) if n % 8 == 0 else ()):
            np.testing.assert_allclose(program.run(args), want, rtol=1e-5, atol=1e-6, err_msg=f"b={n}")
    lines = chosen.speculation_lines()
    assert any("version warp_rows if b mod 8 == 0: kernel over (b_8), 4 launch(es)" in line for line in lines), lines  # 0, 8, 16, 24
    with pytest.raises(ArgumentError, match="forces version 'warp_rows' but its predicate b mod 8 == 0 fails at b=7"):
        forced.run(make_args(7))


def _jax_programs():
    """JAX's softmax, layernorm and MLP exported with a symbolic batch (tests/frontends/test_dynamic.py's)."""
    jax = pytest.importorskip("jax")
    if tuple(int(p) for p in jax.__version__.split(".")[:2]) < (0, 10):
        pytest.skip("the StableHLO frontend needs jax >= 0.10")
    import jax.numpy as jnp

    gamma = RNG.standard_normal(64).astype(np.float32)
    w1, w2 = W1.T[:, :16] / 4, W2[:16] / 4  # [32, 16], [16, 8]

    def layernorm(x):
        mean = x.mean(axis=-1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        return (x - mean) / jnp.sqrt(var + 1e-5) * gamma

    return jax, {"softmax": (lambda x: jax.nn.softmax(x, axis=-1), 128),
                 "layernorm": (layernorm, 64),
                 "mlp": (lambda x: jax.nn.relu(x @ w1) @ w2, 32)}


def _xla_cpu(jax, f, x: np.ndarray) -> np.ndarray:
    """jax.jit(f)(x) on XLA:CPU, also where jax's default device is a GPU (whose f32 dots are TF32:
    the MLP was 1e-3 off on an H100)."""
    with jax.default_device(jax.devices("cpu")[0]):
        return np.asarray(jax.jit(f)(x))


@pytest.mark.slow  # (the default run compares a softmax with jax.jit through the CLI, below)
@pytest.mark.parametrize("name", ["softmax", "layernorm", "mlp"])
def test_jax_programs_over_a_symbolic_batch_match_xla(name):
    # one compile on cuda-sim; at 1, primes and a larger batch equal to jax.jit on XLA:CPU within
    # the corpus tolerance (JAX's programs guard b >= 1)
    from jax import export

    from hlocc.comparison import compare_arrays
    from hlocc.frontends.stablehlo import import_stablehlo

    jax, programs = _jax_programs()
    f, columns = programs[name]
    (b,) = export.symbolic_shape("b")
    exported = export.export(jax.jit(f))(jax.ShapeDtypeStruct((b, columns), np.float32))
    exe = hlocc.compile(import_stablehlo(exported), "cuda-sim")
    for n in (1, 7, 13, 129):
        x = RNG.standard_normal((n, columns)).astype(np.float32)
        why = compare_arrays(_xla_cpu(jax, f, x), exe(x), 1e-5, 1e-5)
        assert why is None, f"{name} at b={n}: {why}"
    check_one_compile(exe)


def test_hlocc_run_of_a_dynamic_stablehlo_module_on_cuda_sim(tmp_path, capsys):
    from jax import export

    from hlocc.cli import main

    jax, programs = _jax_programs()
    f, columns = programs["softmax"]
    (b,) = export.symbolic_shape("b")
    path = tmp_path / "softmax.mlir"
    path.write_text(export.export(jax.jit(f))(jax.ShapeDtypeStruct((b, columns), np.float32)).mlir_module())
    x = RNG.standard_normal((11, columns)).astype(np.float32)
    np.savez(tmp_path / "in.npz", arg0=x)
    np.savez(tmp_path / "out.npz", out0=_xla_cpu(jax, f, x))
    assert main(["run", str(path), "--backend", "cuda-sim", "--stats", "--inputs", str(tmp_path / "in.npz"),
                 "--expected", str(tmp_path / "out.npz"), "--rtol", "1e-5", "--atol", "1e-6"]) == 0
    out = capsys.readouterr().out
    assert "one plan for every size" in out and "0 compiled per size" in out and "simulated sm_90" in out
    assert "matches expected outputs" in out and "specialized for" not in out


def test_a_cuda_launch_passes_the_dims_after_the_buffers_and_the_grid_at_them(monkeypatch):
    # driver.py without a GPU: a fake driver records cuLaunchKernel's grid and 64-bit words
    import ctypes

    from hlocc.backends.cuda import driver

    launches = []

    class FakeDriver:
        class CUresult:
            CUDA_SUCCESS = 0

        @staticmethod
        def cuLaunchKernel(function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
            count = len(kernel.ptx.param_shapes) + len(kernel.ptx.output_shapes) + len(kernel.symbols)
            pointers = (ctypes.c_void_p * count).from_address(params)
            words = [ctypes.c_uint64.from_address(p).value for p in pointers]
            launches.append(((gx, gy, gz), (bx, by, bz), words))
            return (0,)

    monkeypatch.setattr(driver, "_driver", lambda: FakeDriver)
    device = object.__new__(driver.CudaDevice)
    device.stream, device._capture = None, threading.local()
    module = parse_hlo(PROGRAMS["softmax_127"][0])
    program = compile_dynamic_module(module, SimulatedDevice())
    [(_, symbolic)] = program.speculated()
    generic = compile_ptx(symbolic.versions[-1][1].computation, "sm_90")
    kernel = driver.CudaKernel(generic.name, generic.emitter, (), generic.launch_dims, generic.has_work, device,
                               function="f", ptx=generic, symbols=generic.symbols)
    bound = symbolic.bind({"b": 7}, "softmax")  # b mod 8 != 0: the generic version, a row per block
    bound.kernel = kernel  # the generic version's kernel, as a CudaDevice would have loaded it
    device.launch(bound, [0x1000, 0x2000])
    kernel.run_addresses([0x1000, 0x2000], (0,))  # no row: nothing launched
    assert launches == [((7, 1, 1), (32, 1, 1), [0x1000, 0x2000, 7])]
    assert kernel._launches == {(7,): LaunchDims(32, 7), (0,): None}  # each grid evaluated once


BIAS_ADD = """HloModule bias_add
ENTRY e {
  x = f32[?b,?n] parameter(0)
  bias = f32[?n] parameter(1)
  bb = f32[?b,?n] broadcast(bias), dimensions={1}
  ROOT y = f32[?b,?n] add(x, bb)
}
"""


def test_the_gpu_vectorized_version_reads_and_writes_whole_aligned_vectors():
    # runtime/speculation.py on the GPU target: `vectorized if n mod 4 == 0` (16 bytes a thread):
    # its PTX loads and stores v4 only; the generic kernel reads x's unaligned rows element by
    # element. Each forced and chosen, against the evaluator, bounds-checked, memory poisoned.
    reference = hlocc.compile(BIAS_ADD, "interpreter")
    programs = {mode: compile_dynamic_module(parse_hlo(BIAS_ADD), SimulatedDevice(fill=0xA5, check_bounds=True),
                                             speculation=SpeculationOptions(mode))
                for mode in ("on", "force:vectorized", "force:generic")}
    for b, n in [(0, 4), (1, 1), (3, 3), (3, 4), (5, 5), (7, 12), (130, 16), (2, 0)]:
        x, bias = RNG.standard_normal((b, n)).astype(np.float32), RNG.standard_normal(n).astype(np.float32)
        for mode, program in programs.items():
            if mode != "force:vectorized" or n % 4 == 0:
                np.testing.assert_array_equal(program.run([x, bias]), reference(x, bias), err_msg=f"{mode} {b}x{n}")
    [(_, kernel)] = programs["on"].speculated()
    assert [(v.name, v.predicate) for v, _ in kernel.versions] == [("vectorized", "n mod 4 == 0"), ("generic", "true")]
    assert "version vectorized if n mod 4 == 0: kernel over (b, n_4), 5 launch(es)" in programs["on"].speculation_lines()[0]
    vectorized, generic = (compile_ptx(k.computation, "sm_90").ptx for _, k in kernel.versions)
    accesses = [line.split()[0] for line in vectorized.splitlines() if line.strip().startswith(("ld.global", "st.global"))]
    assert sorted(set(accesses)) == ["ld.global.nc.v4.b32", "st.global.v4.b32"] and len(accesses) == 3
    assert "ld.global.nc.b32" in generic and "st.global.b32" in generic
    with pytest.raises(ArgumentError, match="predicate n mod 4 == 0 fails at n=5"):
        programs["force:vectorized"].run([np.ones((1, 5), np.float32), np.ones(5, np.float32)])


class _Producer:
    """A DLPack producer that is not a numpy array (as a torch or JAX array on the device would be)."""

    def __init__(self, array: np.ndarray):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_device_arrays_go_in_and_stay_on_the_device_at_every_size():
    # DLPack arrays of the device's memory (the SimulatedDevice's is the host's) are used in place,
    # and `return_device_arrays` leaves the results in device memory, as on the static executable
    exe = hlocc.compile(BIAS_ADD, "cuda-sim")
    reference = hlocc.compile(BIAS_ADD, "interpreter")
    for b, n in [(5, 7), (2, 16), (0, 3)]:
        x, bias = RNG.standard_normal((b, n)).astype(np.float32), RNG.standard_normal(n).astype(np.float32)
        out = exe(_Producer(x), _Producer(bias), return_device_arrays=True)
        run = exe.program.last_run
        assert run.arguments_in_place == (2 if b else 1) and run.uploaded_bytes == run.downloaded_bytes == 0
        np.testing.assert_array_equal(np.from_dlpack(out), reference(x, bias))
    assert exe.compilations == 1
    with pytest.raises(ArgumentError, match=r"expected shape f32\[\?b,\?n\], got an array of shape \[3\]"):
        exe(_Producer(np.ones(3, np.float32)), _Producer(np.ones(3, np.float32)))
    with pytest.raises(ArgumentError, match="return_device_arrays: the cpu backend returns host arrays only"):
        hlocc.compile(BIAS_ADD, "cpu")(x, bias, return_device_arrays=True)
