"""The matmul emitter through the cpu backend with `gemm="codegen"` (dot fusions as generated
kernels): exact against the evaluator on integer-valued inputs (sums of small integers do not
depend on the order), for M, N, K in {0, 1, primes}, transposed operands (by dimension numbers, by
a fused transpose, by layout), batch dimensions and fused epilogues; bf16 within tolerance."""

from __future__ import annotations

import numpy as np
import pytest

import hlocc
from corpus import JAX_DIR, require
from hlocc.analysis.hero import EmitterKind, computation_emitter_kind
from hlocc.backends.cpu.kernel import compile_fusion
from hlocc.comparison import compare_arrays
from hlocc.evaluator import Evaluator
from hlocc.hlo.parser import parse_hlo
from hlocc.hlo.types import PRIMITIVE_TYPES


def _ints(shape, dtype, rng):
    return rng.integers(-3, 4, shape).astype(PRIMITIVE_TYPES[dtype].dtype)


def _check(text: str, *, exact: bool = True, rtol: float = 0.0, atol: float = 0.0, seed: int = 0,
           floats: bool = False, kernels: int = 1):
    module = hlocc.compile(text, "interpreter")
    rng = np.random.default_rng(seed)
    args = []
    for shape in module.parameter_shapes:
        if floats:
            args.append(rng.standard_normal(shape.dims).astype(shape.dtype))
        else:
            args.append(_ints(shape.dims, shape.element_type.name, rng))
    expected = module(*args)
    exe = hlocc.compile(text, "cpu", gemm="codegen")
    stats = exe.runner.stats
    assert stats.kernels_by_emitter["gemm"] == kernels, stats.to_string()
    assert not stats.library_calls["gemm"] and not stats.host_ops, stats.to_string()
    got = exe(*args)
    if exact:
        np.testing.assert_array_equal(np.asarray(got, np.float64), np.asarray(expected, np.float64))
    else:
        why = compare_arrays(expected, got, rtol, atol)
        assert why is None, why
    return exe


def _dot_module(m: int, n: int, k: int, dtype: str = "f32", lhs_t: bool = False, rhs_t: bool = False) -> str:
    lhs = f"{dtype}[{k},{m}]" if lhs_t else f"{dtype}[{m},{k}]"
    rhs = f"{dtype}[{n},{k}]" if rhs_t else f"{dtype}[{k},{n}]"
    return f"""HloModule dot
ENTRY e {{
  a = {lhs} parameter(0)
  b = {rhs} parameter(1)
  ROOT d = {dtype}[{m},{n}] dot(a, b), lhs_contracting_dims={{{0 if lhs_t else 1}}}, rhs_contracting_dims={{{1 if rhs_t else 0}}}
}}"""


@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (7, 5, 3), (13, 1, 11), (1, 17, 2), (4, 6, 0),
                                   (67, 37, 41)])  # the last over NAIVE_BELOW: the default schedule
def test_dot_sizes_exact(m, n, k):
    _check(_dot_module(m, n, k))


@pytest.mark.parametrize("lhs_t,rhs_t", [(True, False), (False, True), (True, True)])
def test_transposed_operands_by_dimension_numbers(lhs_t, rhs_t):
    _check(_dot_module(5, 3, 7, lhs_t=lhs_t, rhs_t=rhs_t))


def test_empty_output_needs_no_kernel():
    exe = hlocc.compile(_dot_module(0, 3, 5), "cpu", gemm="codegen")
    assert exe(np.zeros((0, 5), np.float32), np.ones((5, 3), np.float32)).shape == (0, 3)


def test_fused_transpose_copy_and_layout_are_absorbed_into_the_operand_maps():
    # As gemm-fusion leaves them (algsimp would fold a lone transpose into the dimension numbers):
    # lhs through a transpose and a widening convert, rhs through a layout-changing copy of a
    # column-major parameter; the kernel reads the parameters where they are.
    module = parse_hlo("""HloModule t
ENTRY fused {
  a = bf16[3,5] parameter(0)
  c = f32[3,5] convert(a)
  at = f32[5,3] transpose(c), dimensions={1,0}
  b = f32[3,7]{0,1} parameter(1)
  bc = f32[3,7] copy(b)
  ROOT d = f32[5,7] dot(at, bc), lhs_contracting_dims={1}, rhs_contracting_dims={0}, backend_config={"__hlocc_gemm":{}}
}""")
    assert computation_emitter_kind(module.entry) is EmitterKind.GEMM
    kernel = compile_fusion(module.entry, use_cache=False)
    assert kernel.emitter == "gemm"
    rng = np.random.default_rng(1)
    a, b = _ints((3, 5), "bf16", rng), _ints((3, 7), "f32", rng)
    expected = Evaluator().run(module, [a, b])
    np.testing.assert_array_equal(kernel(a, b)[0], expected)


def test_batch_dims_and_several_contracting_dims():
    _check("""HloModule b
ENTRY e {
  a = f32[2,3,5,4] parameter(0)
  b = f32[3,4,2,7] parameter(1)
  ROOT d = f32[2,3,5,7] dot(a, b), lhs_batch_dims={0,1}, rhs_batch_dims={2,0}, lhs_contracting_dims={3}, rhs_contracting_dims={1}
}""")
    _check("""HloModule c
ENTRY e {
  a = f32[5,2,3] parameter(0)
  b = f32[3,2,7] parameter(1)
  ROOT d = f32[5,7] dot(a, b), lhs_contracting_dims={1,2}, rhs_contracting_dims={1,0}
}""")


def test_bias_relu_epilogue_with_an_output_layout():
    exe = _check("""HloModule e
ENTRY e {
  a = f32[5,3] parameter(0)
  b = f32[3,7] parameter(1)
  bias = f32[7] parameter(2)
  d = f32[5,7] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bb = f32[5,7] broadcast(bias), dimensions={1}
  s = f32[5,7] add(d, bb)
  z = f32[5,7] broadcast(f32[] constant(0)), dimensions={}
  ROOT r = f32[5,7]{0,1} maximum(s, z)
}""")
    assert exe.runner.stats.kernels == 1


def test_epilogue_reading_the_dot_several_times():
    # x*x + 2x: the dot's value has three uses inside the epilogue, one exit.
    _check("""HloModule g
ENTRY e {
  a = f32[4,3] parameter(0)
  b = f32[3,6] parameter(1)
  d = f32[4,6] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  sq = f32[4,6] multiply(d, d)
  two = f32[4,6] add(d, d)
  ROOT r = f32[4,6] add(sq, two)
}""")


def test_bf16_dot_with_f32_convert_epilogue():
    text = """HloModule h
ENTRY e {
  a = bf16[6,33] parameter(0)
  b = bf16[33,10] parameter(1)
  d = bf16[6,10] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT c = f32[6,10] convert(d)
}"""
    _check(text)  # integer sums below 256 are exact in bf16: the kernel rounds once, as XLA does
    _check(text, exact=False, rtol=1e-2, atol=1e-2, floats=True)


def test_f32_gelu_epilogue_within_tolerance():
    _check("""HloModule gelu
ENTRY e {
  a = f32[8,16] parameter(0)
  b = f32[16,9] parameter(1)
  d = f32[8,9] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  half = f32[8,9] broadcast(f32[] constant(0.5)), dimensions={}
  one = f32[8,9] broadcast(f32[] constant(1)), dimensions={}
  t = f32[8,9] tanh(d)
  p = f32[8,9] add(one, t)
  h = f32[8,9] multiply(half, d)
  ROOT r = f32[8,9] multiply(h, p)
}""", exact=False, rtol=1e-5, atol=1e-5, floats=True)


def test_auto_is_the_cpu_default_and_library_elsewhere():
    from hlocc.compiler import default_gemm

    assert default_gemm("cpu") == "auto" and default_gemm("cuda") == default_gemm("interpreter") == "library"
    exe = hlocc.compile(_dot_module(3, 4, 5), "cpu")  # a small dot: a generated kernel under auto
    assert exe.runner.stats.kernels_by_emitter["gemm"] == 1 and not exe.runner.stats.library_calls["gemm"]
    exe = hlocc.compile(_dot_module(3, 4, 5), "cpu", gemm="library")
    assert exe.runner.stats.library_calls["gemm"] == 1 and not exe.runner.stats.kernels_by_emitter["gemm"]





@pytest.mark.parametrize("case,kernels,calls", [("mlp_f32", 0, 2), ("attention_f32", 2, 0)])
def test_gemm_auto_on_the_corpus_programs(case, kernels, calls):
    """`gemm="auto"`: the corpus's small dots (under AUTO_MAX_WORK: attention's) become generated
    kernels, the MLP's stay library calls, and the programs match XLA:CPU's outputs."""
    require(JAX_DIR)
    rtol = 1e-4
    exe = hlocc.compile((JAX_DIR / f"{case}.hlo").read_text(), "cpu", gemm="auto")
    stats = exe.runner.stats
    assert (stats.kernels_by_emitter["gemm"], stats.library_calls["gemm"]) == (kernels, calls), stats.to_string()
    inputs, outputs = np.load(JAX_DIR / f"{case}.in.npz"), np.load(JAX_DIR / f"{case}.out.npz")
    got = exe(*[inputs[k] for k in inputs.files])
    got = got if isinstance(got, (list, tuple)) else [got]
    for value, key in zip(got, outputs.files):
        np.testing.assert_allclose(np.asarray(value), outputs[key], rtol=rtol, atol=1e-5)


def test_gemm_auto_keeps_large_dots_library_calls():
    exe = hlocc.compile(_dot_module(256, 256, 256), "cpu", gemm="auto")
    assert exe.runner.stats.library_calls["gemm"] == 1 and not exe.runner.stats.kernels_by_emitter["gemm"]


def test_gemm_codegen_is_an_option_of_the_compiling_backends():
    with pytest.raises(hlocc.errors.UnsupportedError, match="gemm='codegen'"):
        hlocc.compile(_dot_module(3, 4, 5), "interpreter", gemm="codegen")
    with pytest.raises(hlocc.errors.UnsupportedError, match="gemm='blas'"):
        hlocc.compile(_dot_module(3, 4, 5), "cpu", gemm="blas")


def test_cli_gemm_codegen_option(tmp_path, capsys):
    from hlocc.cli import main

    path = tmp_path / "dot.hlo"
    path.write_text(_dot_module(3, 4, 5))
    assert main(["run", str(path), "--backend", "cpu", "--gemm", "codegen", "--stats"]) == 0
    out = capsys.readouterr().out
    assert "kernels: 1 (gemm 1)" in out and "library calls: none" in out
    assert main(["run", str(path), "--backend", "cpu", "--gemm", "library", "--stats"]) == 0
    assert "library calls: gemm 1" in capsys.readouterr().out


@pytest.mark.slow  # each compiles an 8x16 register-blocked kernel (5-10 s on a loaded machine)
@pytest.mark.parametrize("dtype", ["f16", "f64"])
def test_f16_and_f64_through_the_default_schedule(dtype):
    _check(_dot_module(40, 33, 31, dtype))  # over NAIVE_BELOW: tiled, register-blocked, parallel


@pytest.mark.slow  # an 8x16 register-blocked kernel (about 5 s on a loaded machine)
def test_residual_add_with_an_integer_root():
    _check("""HloModule s
ENTRY e {
  a = f32[40,33] parameter(0)
  b = f32[33,31] parameter(1)
  x = f32[40,31] parameter(2)
  d = f32[40,31] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  r = f32[40,31] add(d, x)
  ROOT c = s32[40,31] convert(r)
}""")


def test_pred_root():
    _check("""HloModule p
ENTRY e {
  a = f32[4,3] parameter(0)
  b = f32[3,5] parameter(1)
  d = f32[4,5] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  z = f32[4,5] broadcast(f32[] constant(0)), dimensions={}
  ROOT r = pred[4,5] compare(d, z), direction=GT
}""")
