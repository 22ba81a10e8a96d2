"""`convolution-gemm-fusion` (the cpu pipeline): convolutions compiled as implicit-gemm fusions
compute what the reference evaluator does.

Random convolutions over 1 to 3 spatial dimensions (every dimension order, strides, padding incl.
negative, lhs and rhs dilation, window reversal, feature groups) in f32 on integer-valued inputs:
every product and partial sum is an exact integer in f32, so the kernel must match the evaluator
exactly whatever its summation order. Then layouts (NCHW and NHWC physical orders: both matmul
orientations), fused bias/batch-norm/ReLU epilogues, bf16 (f32 accumulation, one rounding), and
what stays a library call (batch groups, f64, empty shapes)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from test_convolution_to_gemm import random_convolution

import hlocc
from hlocc.evaluator import Evaluator
from hlocc.hlo.verifier import verify_module
from hlocc.passes.convolution_to_gemm import features_on_n, implicit_gemm_fuses
from hlocc.passes.pipeline import run_passes


def compile_cpu(text: str):
    exe = hlocc.compile(text, "cpu")
    return exe, exe.runner.stats


def run_exact(text: str, args) -> None:
    exe, stats = compile_cpu(text)
    assert stats.fusions_by_emitter["gemm"] == 1 and not stats.library_calls, stats.to_string()
    np.testing.assert_array_equal(exe(*args), hlocc.compile(text, "interpreter")(*args), err_msg=text)


def integer_valued(module, seed: int) -> list[np.ndarray]:
    """Small integers in f32, one array per entry parameter."""
    rng = np.random.default_rng(seed)
    return [rng.integers(-4, 5, p.shape.dims).astype(np.float32) for p in module.entry.parameters]


DEFAULT_SEEDS = (10, 30)  # 3 and 1 spatial dimensions, groups, reversal, dilations, negative padding


@pytest.mark.parametrize("seed", DEFAULT_SEEDS)
def test_random_convolutions_are_exact(seed):
    text = random_convolution(seed)
    if text is None:
        pytest.skip("the drawn window leaves no output")
    text = text.replace("s32", "f32")
    run_exact(text, integer_valued(hlocc.parse_hlo(text), seed))


@pytest.mark.slow
@pytest.mark.parametrize("seed", [s for s in range(60) if s not in DEFAULT_SEEDS])
def test_more_random_convolutions_are_exact(seed):
    test_random_convolutions_are_exact(seed)


def conv2d(layouts: tuple[str, str, str], labels: str = "bf01_oi01->bf01", *, epilogue: bool = False,
           dtype: str = "f32", stride: int = 1, groups: int = 1) -> str:
    """A 3x3 padded convolution of [2, 4, 6, 5] by 6 features, its operands and result in these
    layouts; `epilogue`: bias, batch norm and ReLU after it (the torch CNN's)."""
    body = f"""  r = {dtype}[2,6,{6 // stride},{5 // stride + (5 % stride > 0)}]{{{layouts[2]}}} convolution(x, k), \
window={{size=3x3 stride={stride}x{stride} pad=1_1x1_1}}, dim_labels={labels}, feature_group_count={groups}"""
    if epilogue:
        shape = f"{dtype}[2,6,{6 // stride},{5 // stride + (5 % stride > 0)}]{{{layouts[2]}}}"
        body = body.replace("  r = ", "  c = ") + f"""
  bias = {dtype}[6] parameter(2)
  scale = {dtype}[6] parameter(3)
  b1 = {shape} broadcast(bias), dimensions={{1}}
  b2 = {shape} broadcast(scale), dimensions={{1}}
  add = {shape} add(c, b1)
  mul = {shape} multiply(add, b2)
  zero = {dtype}[] constant(0)
  z = {shape} broadcast(zero), dimensions={{}}
  r = {shape} maximum(mul, z)"""
    params = f"""  x = {dtype}[2,4,6,5]{{{layouts[0]}}} parameter(0)
  k = {dtype}[6,{4 // groups},3,3]{{{layouts[1]}}} parameter(1)"""
    return f"HloModule c\n\nENTRY e {{\n{params}\n{body.replace('  r = ', '  ROOT r = ')}\n}}\n"


LAYOUTS = {"nchw": ("3,2,1,0", "3,2,1,0", "3,2,1,0"), "nhwc": ("1,3,2,0", "0,1,3,2", "1,3,2,0"),
           "mixed": ("0,1,3,2", "3,2,1,0", "2,1,0,3")}


@pytest.mark.parametrize("layout,stride", [("nchw", 1), ("nhwc", 2),
                                           *(pytest.param(layout, stride, marks=pytest.mark.slow)
                                             for layout, stride in [("nchw", 2), ("nhwc", 1), ("mixed", 1),
                                                                    ("mixed", 2)])])
def test_layouts_and_strides(layout, stride):
    text = conv2d(LAYOUTS[layout], stride=stride)
    run_exact(text, integer_valued(hlocc.parse_hlo(text), 3))


def test_fused_epilogue_is_one_kernel():
    text = conv2d(LAYOUTS["nchw"], epilogue=True)
    module = hlocc.parse_hlo(text)
    args = integer_valued(module, 4)
    exe, stats = compile_cpu(text)
    # the pad of the input and the gemm with its bias, scale and ReLU: two kernels, no library call
    assert stats.fusions_by_emitter["gemm"] == 1 and stats.kernels == 2 and not stats.library_calls, \
        stats.to_string()
    np.testing.assert_array_equal(exe(*args), Evaluator().run(module, args))


def test_weights_from_a_broadcast_constant():
    """A transposed convolution whose weights are a broadcast constant (JAX's `jnp.ones` kernel, torch's
    conv_transpose1d with a constant weight): the fusion's operand walk reached the constant and
    raised IndexError."""
    text = """HloModule m
ENTRY e {
  x = f32[1,2,5] parameter(0)
  one = f32[] constant(1)
  w = f32[3,2,3] broadcast(one), dimensions={}
  ROOT c = f32[1,3,11] convolution(x, w), window={size=3 pad=2_2 lhs_dilate=2}, dim_labels=bf0_oi0->bf0
}"""
    x = np.arange(10, dtype=np.float32).reshape(1, 2, 5)
    np.testing.assert_array_equal(hlocc.compile(text, "cpu")(x), hlocc.compile(text, "interpreter")(x))


@pytest.mark.slow
def test_grouped_nhwc_convolution():
    text = conv2d(LAYOUTS["nhwc"], groups=2)
    run_exact(text, integer_valued(hlocc.parse_hlo(text), 5))


@pytest.mark.parametrize("out", ["bf16", pytest.param("f32", marks=pytest.mark.slow)])
def test_bf16_accumulates_in_f32(out):
    """bf16 operands: products summed in f32 and rounded once to the result type, as XLA and the
    evaluator do (`dtype` of the operands; the result's type may be f32)."""
    text = conv2d(LAYOUTS["nchw"], dtype="bf16", epilogue=True)
    if out == "f32":
        text = text.replace("ROOT r = bf16", "ROOT r = f32").replace("maximum(mul, z)", "maximum(mul32, z32)")
        text = text.replace("  ROOT r", "  mul32 = f32[2,6,6,5]{3,2,1,0} convert(mul)\n  zero32 = f32[] constant(0)\n"
                            "  z32 = f32[2,6,6,5]{3,2,1,0} broadcast(zero32), dimensions={}\n  ROOT r")
    module = hlocc.parse_hlo(text)
    rng = np.random.default_rng(6)
    args = [rng.standard_normal(p.shape.dims).astype(ml_dtypes.bfloat16) for p in module.entry.parameters]
    exe, stats = compile_cpu(text)
    assert stats.fusions_by_emitter["gemm"] == 1, stats.to_string()
    got = np.asarray(exe(*args), np.float64)
    want = np.asarray(Evaluator().run(module, args), np.float64)
    # one bf16 rounding apart at most (the sum's order differs, in f32)
    np.testing.assert_allclose(got, want, rtol=2 ** -7, atol=1e-2)


def few_positions(kernel_layout: str, groups: int = 1) -> str:
    """A 1x1 convolution of 8 images of 2x2 (4 positions each: too few for n), 128 -> 256 features
    in `groups` feature groups (131K multiply-adds per image without groups: no naive kernel)."""
    return f"""HloModule f
ENTRY e {{
  x = f32[8,128,2,2] parameter(0)
  k = f32[1,1,{128 // groups},256]{{{kernel_layout}}} parameter(1)
  ROOT c = f32[8,256,2,2] convolution(x, k), window={{size=1x1}}, dim_labels=bf01_01io->bf01, \
feature_group_count={groups}
}}"""


@pytest.mark.parametrize("groups", [pytest.param(1, marks=pytest.mark.slow), 2])
def test_few_positions_put_the_features_along_n(groups):
    """An HWIO kernel (output features minor): features along n, (image, position) along m, the
    group as the gemm's batch."""
    text = few_positions("3,2,1,0", groups)
    module = hlocc.parse_hlo(text)
    [conv] = [i for i in module.entry.instructions if i.opcode == "convolution"]
    assert implicit_gemm_fuses(conv) and features_on_n(conv)
    run_exact(text, integer_valued(module, 8))


def test_few_positions_and_a_strided_kernel_stay_library_calls():
    """An OIHW-like kernel cannot give n contiguous rows, and 4 positions cannot fill it: the
    library's product (the images side by side) is the faster one."""
    module = hlocc.parse_hlo(few_positions("2,3,1,0"))
    [conv] = [i for i in module.entry.instructions if i.opcode == "convolution"]
    assert not features_on_n(conv) and not implicit_gemm_fuses(conv)


@pytest.mark.parametrize("case", ["batch_groups", "f64", "empty"])
def test_library_fallbacks(case):
    text = {"batch_groups": """HloModule m
ENTRY e {
  a = f32[4,5,2] parameter(0)
  b = f32[3,2,2] parameter(1)
  ROOT c = f32[2,3,2] convolution(a, b), window={size=3}, dim_labels=b0f_0io->b0f, batch_group_count=2
}""", "f64": conv2d(LAYOUTS["nchw"], dtype="f64"), "empty": conv2d(LAYOUTS["nchw"]).replace("[2,", "[0,")}[case]
    module = hlocc.parse_hlo(text)
    fused = hlocc.parse_hlo(text)
    run_passes(fused, ["convolution-gemm-fusion"])
    verify_module(fused)
    assert fused.to_string() == module.to_string()
    exe, stats = compile_cpu(text)
    args = integer_valued(module, 7)
    if case == "f64":
        args = [a.astype(np.float64) for a in args]
    assert stats.fusions_by_emitter["gemm"] == 0
    np.testing.assert_array_equal(exe(*args), Evaluator().run(module, args))


def packed_convolution(dtype: str, stride: int, layout: str) -> str:
    """A 3x3 convolution of two 9x11 images of 5 features: NCHW by 20 OIHW features (the input is
    B, n its output positions) or NHWC by 64 HWIO features (features along n: the input is A, m
    its images' positions), read through the table of their offsets (transforms/matmul/packed.py
    `offset_table`)."""
    h, w = (9 - 3) // stride + 1, (11 - 3) // stride + 1
    if layout == "nchw":
        shapes, labels = ("[2,5,9,11]", "[20,5,3,3]", f"[2,20,{h},{w}]"), "bf01_oi01->bf01"
    else:
        shapes, labels = ("[2,9,11,5]", "[3,3,5,64]", f"[2,{h},{w},64]"), "b01f_01io->b01f"
    return f"""HloModule p
ENTRY e {{
  x = {dtype}{shapes[0]} parameter(0)
  k = {dtype}{shapes[1]} parameter(1)
  ROOT c = {dtype}{shapes[2]} convolution(x, k), window={{size=3x3 stride={stride}x{stride}}}, dim_labels={labels}
}}"""


@pytest.mark.parametrize("dtype,stride,layout,pairs", [
    ("f32", 1, "nchw", False), ("bf16", 2, "nchw", False), ("bf16", 2, "nhwc", False),
    *(pytest.param(*case, marks=pytest.mark.slow) for case in [("bf16", 1, "nchw", False), ("f32", 1, "nhwc", False),
                                                                ("bf16", 1, "nchw", True), ("bf16", 1, "nhwc", True)])])
def test_packed_implicit_gemm_reads_the_input_through_its_offset_table(dtype, stride, layout, pairs):
    """A packed schedule with several M, N and K blocks (a block starts mid-row of the output, its
    last panel partial; the last K block shorter, odd): every packed element of the input is the
    one the convolution's map names, in f32 and in bf16 (widened, or as vdpbf16ps pairs). The
    input as B: f32 rows outside; bf16 micro-panels outside (stride 1: 63 columns in blocks of
    32), or constant offsets (stride 2: 20 columns, one block); as A (NHWC): the rows' table."""
    import llvmlite.binding as llvm

    from hlocc.backends.cpu.kernel import compile_fusion
    from hlocc.codegen.schedule import MatmulSchedule, use_schedule

    if pairs and "+avx512bf16" not in llvm.get_host_cpu_features().flatten():
        pytest.skip("no AVX512-BF16 on this host")
    module = hlocc.parse_hlo(packed_convolution(dtype, stride, layout))
    [conv] = [i for i in module.entry.instructions if i.opcode == "convolution"]
    assert features_on_n(conv) == (layout == "nhwc")
    rng = np.random.default_rng(9)
    np_dtype = ml_dtypes.bfloat16 if dtype == "bf16" else np.float32
    args = [rng.integers(-4, 5, p.shape.dims).astype(np_dtype) for p in module.entry.parameters]
    want = np.asarray(Evaluator().run(module, args), np.float64)
    run_passes(module, ["convolution-gemm-fusion"])
    [fusion] = [i for i in module.entry.instructions if i.opcode == "fusion"]
    schedule = MatmulSchedule(mc=12, nc=32, kc=16, mr=6, nr=16, parallel=True, pack=(0, 1), hoist_address=True,
                              fuse_epilogue=True, k_pairs=pairs)
    with use_schedule(schedule):
        kernel = compile_fusion(fusion.called_computations()[0], use_cache=False)
    operands = [args[o.parameter_number] for o in fusion.operands]
    np.testing.assert_array_equal(np.asarray(kernel(*operands)[0], np.float64), want)
