"""The StableHLO frontend: every JAX corpus program lowered by jax to StableHLO, imported, run on the
interpreter (and a few on the cpu backend) against the corpus outputs; per-op-family programs
against jax.jit; the generic printed form, Exported objects, errors, and the HLO print/parse round
trip of imported modules."""

from __future__ import annotations

import collections
import importlib.util

import numpy as np
import pytest

from corpus import JAX_DIR, jax_cases, load_npz, require

jax = pytest.importorskip("jax", minversion="0.10", reason="the StableHLO frontend needs jax>=0.10 (the [jax] extra)")
jnp = jax.numpy
lax = jax.lax

import hlocc  # noqa: E402
from hlocc.cli import flatten  # noqa: E402
from hlocc.comparison import compare_arrays  # noqa: E402
from hlocc.frontends import import_stablehlo, import_stablehlo_file, is_stablehlo_text  # noqa: E402

CASES = {c["name"]: c for c in jax_cases()}
SMALL_CASES = sorted(name for name, c in CASES.items() if c["perf"] != "yes")
CPU_CASES = ["bias_add_tanh", "while_bisection"]  # each cpu compile costs about a second


@pytest.fixture(scope="module")
def generator():
    """The corpus generator module (its `CASES` rebuild each case's function and inputs bit for bit)."""
    require(JAX_DIR)
    spec = importlib.util.spec_from_file_location("gen_public", JAX_DIR / "gen_public.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_case(generator, name):
    """(function, numpy inputs, x64 flag) of corpus case `name`."""
    case = next(c for c in generator.CASES if c["name"] == name)
    with jax.enable_x64(case["x64"]):
        fn, args = case["builder"](generator.rng_for(generator.BASE_SEED, name))
    return fn, [np.asarray(a) for a in args], case["x64"]


def run_module(module, args, backend="interpreter"):
    return flatten(hlocc.compile(module, backend=backend)(*args))


def check_against_corpus(name, outputs):
    expected = load_npz(JAX_DIR / f"{name}.out.npz")
    assert len(outputs) == len(expected)
    for i, got in enumerate(outputs):
        why = compare_arrays(expected[f"out{i}"], got, float(CASES[name]["rtol"]), float(CASES[name]["atol"]))
        assert why is None, f"{name} out{i}: {why}"


@pytest.mark.parametrize("name", SMALL_CASES)
def test_corpus_program_on_interpreter(generator, name):
    fn, args, x64 = build_case(generator, name)
    with jax.enable_x64(x64):
        text = jax.jit(fn).lower(*args).as_text()
    check_against_corpus(name, run_module(import_stablehlo(text), args))


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in CPU_CASES else pytest.mark.slow)
                                  for n in SMALL_CASES])
def test_corpus_program_on_cpu(generator, name):
    """Through `jax.export` (an Exported object) onto the cpu backend: two programs by default, all
    with -m slow."""
    fn, args, x64 = build_case(generator, name)
    with jax.enable_x64(x64):
        exported = jax.export.export(jax.jit(fn))(*[jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args])
    check_against_corpus(name, run_module(import_stablehlo(exported), args, backend="cpu"))


@pytest.mark.parametrize("name", sorted(name for name, c in CASES.items() if c["perf"] == "yes"))
def test_perf_program_imports(generator, name):
    """The perf programs (inputs too large for the interpreter here) import to the corpus's HLO
    signature."""
    case = next(c for c in generator.CASES if c["name"] == name)
    fn, args, _ = build_case(generator, name)
    module = import_stablehlo(jax.jit(fn).lower(*[jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args]).as_text())
    reference = hlocc.parse_hlo_file(JAX_DIR / f"{name}.hlo")
    assert module.entry.program_shape == reference.entry.program_shape, case["name"]


# -- per-op families against jax.jit ----------------------------------------------------------------
def _normal(*shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed + len(shape)).standard_normal(shape).astype(dtype)


OP_PROGRAMS = {
    "math": (lambda x: (jnp.exp(x), jnp.log1p(jnp.abs(x)), jnp.expm1(x), jnp.sin(x), jnp.tan(x) * 0.1, jnp.cbrt(x),
                        jnp.floor(x), jnp.ceil(x), jnp.round(x), jax.nn.sigmoid(x), jnp.sign(x), jnp.arctan2(x, 2.0),
                        jnp.isfinite(x / 0.0), x ** 3.0), [_normal(4, 6)]),
    "chlo": (lambda x: (jnp.arcsin(x * 0.5), jnp.arccos(x * 0.5), jnp.sinh(x), jnp.cosh(x), jnp.arctan(x),
                        jnp.arcsinh(x), jnp.arctanh(x * 0.5), jnp.square(x), lax.erf(x), lax.erf_inv(x * 0.5),
                        lax.lgamma(jnp.abs(x) + 0.5), lax.digamma(jnp.abs(x) + 0.5), lax.erfc(x),
                        jnp.nextafter(x, 0.0)), [_normal(3, 5)]),
    "compare_convert": (lambda x, i: (x > 0, i <= 3, x == x, lax.convert_element_type(x, jnp.int32),
                                      lax.bitcast_convert_type(x, jnp.uint32), jnp.clip(x, -0.5, 0.5),
                                      jnp.where(x > 0, x, 2 * x), i.astype(jnp.bfloat16) * 2,
                                      lax.reduce_precision(x, 5, 10)),
                        [_normal(8), np.arange(8, dtype=np.int32)]),
    "integers": (lambda a, b: (a // b, a % b, a >> 2, lax.shift_right_logical(a, 3), a & b, ~a, lax.population_count(a),
                               lax.clz(a), jnp.maximum(a, b), jnp.abs(a)),
                 [np.arange(-6, 6, dtype=np.int32) * 37, np.arange(1, 13, dtype=np.int32)]),
    "shapes": (lambda x: (x.reshape(6, 4), x.T, x[1:3, ::2], jnp.flip(x, 1), jnp.concatenate([x, x * 2], 0),
                          jnp.pad(x, ((1, 0), (2, 1))), jnp.broadcast_to(x[:, :1], (4, 6)), jnp.expand_dims(x, 0),
                          jnp.tile(x, (2, 1)), lax.pad(x, 0.0, ((0, 0, 1), (1, -1, 0))),
                          jnp.arange(5, dtype=jnp.float32) * x[0, 0],
                          lax.with_sharding_constraint(x, jax.sharding.SingleDeviceSharding(jax.devices()[0])) + 1),
               [_normal(4, 6)]),
    "indexing": (lambda x, i: (x[i], x[:, i], x.at[i].add(1.0), x.at[i, 2].set(-1.0),
                               lax.dynamic_slice(x, (i[0], 1), (2, 3)),
                               lax.dynamic_update_slice(x, jnp.ones((1, 2), x.dtype), (i[1], 2)),
                               jnp.take_along_axis(x, jnp.argsort(x, 1), 1), x.at[i].max(5.0)),
                 [_normal(5, 4), np.array([3, 0, 3], np.int32)]),
    "reductions": (lambda x: (x.sum(), x.max(0), jnp.argmin(x, 1), x.prod(1), jnp.any(x > 1, 0), jnp.cumprod(x, 1),
                              lax.reduce_window(x, 0.0, lax.add, (2, 2), (1, 1), "SAME"), jnp.logaddexp.reduce(x, 1)),
                   [_normal(6, 5)]),
    "linalg": (lambda a, b, img, k: (a @ b, jnp.einsum("ij,ij->i", a, a), jnp.dot(a, b, precision="highest"),
                                     lax.conv_general_dilated(img, k, (2, 1), "SAME", rhs_dilation=(1, 2)),
                                     lax.conv_general_dilated(img, k[:2, :1], (1, 1), "VALID",
                                                              feature_group_count=2)),
               [_normal(3, 4), _normal(4, 5), _normal(1, 2, 7, 6), _normal(3, 2, 3, 2)]),
    "sort_topk": (lambda x: (jnp.sort(x), jnp.argsort(-x, stable=True), lax.top_k(x, 3)[1], jnp.median(x, 1)),
                  [_normal(4, 9)]),
    # the ApproxTopK custom call (with its comparator function) as XLA:CPU runs it: an exact top-k
    "approx_top_k": (lambda x: (*lax.approx_max_k(x, 3, recall_target=0.9), *lax.approx_min_k(x.T, 2, reduction_dimension=0),
                                lax.approx_max_k(x[0].astype(jnp.bfloat16), 4)[0]),
                     [_normal(4, 30)]),
    "control": (lambda x, n: (lax.fori_loop(0, n, lambda i, c: c * 0.5 + x.sum(), x),
                              lax.switch(n % 3, [lambda: x, lambda: -x, lambda: x * 2]),
                              lax.cond(n > 2, lambda v: v.sum(), lambda v: v.max(), x),
                              lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * x), (0, x))[1]),
                [_normal(5), np.int32(4)]),
    "grad_pool": (lambda x: jax.grad(lambda y: lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2), (1, 2, 2),
                                                                 "VALID").sum())(x),
                  [_normal(2, 4, 6)]),
    "random": (lambda k, k4: (jax.random.uniform(k, (3, 4)), jax.random.bits(k, (5,)),
                              lax.rng_bit_generator(k4, (3, 4), dtype=jnp.uint32,
                                                    algorithm=lax.RandomAlgorithm.RNG_THREE_FRY),
                              lax.rng_bit_generator(k4, (5,), dtype=jnp.uint32,
                                                    algorithm=lax.RandomAlgorithm.RNG_PHILOX)),
               [np.array([0, 42], np.uint32), np.array([1, 2, 3, 4], np.uint32)]),
    "constants": (lambda x: (x + np.linspace(-3, 3, 300, dtype=np.float32).reshape(3, 100),
                             x.astype(jnp.bfloat16) * np.linspace(0, 2, 300).astype(jnp.bfloat16).reshape(3, 100),
                             jnp.where(np.arange(300).reshape(3, 100) % 3 == 0, x, 0.0),
                             x.astype(jnp.float16) + np.float16(0.1) * np.arange(100, dtype=np.float16),
                             x.astype(jnp.complex64) * np.array([1j, 2, -1 + 0.5j] * 100, np.complex64).reshape(3, 100),
                             x.astype(jnp.int8) + np.arange(-50, 50, dtype=np.int8),
                             jnp.float32(np.nan) * x[0, 0] + np.array([np.inf, -np.inf, 0.0], np.float32)),
                  [_normal(3, 100)]),
    "spectral": (lambda x: (jnp.fft.fft(x), jnp.fft.rfft(x.real), jnp.fft.irfft(x, 6), jnp.fft.ifft2(x)),
                 [(_normal(3, 4) + 1j * _normal(3, 4, seed=5)).astype(np.complex64)]),
    "remat_barrier": (jax.grad(lambda x: jax.checkpoint(lambda y: jnp.sin(jnp.sin(y)))(x).sum()), [_normal(4)]),
    "narrow_complex": (lambda x, c: (x.astype(jnp.bfloat16) + jnp.bfloat16(1.5),
                                     x.astype(jnp.float8_e4m3fn).astype(jnp.float32), c * (1 + 2j), jnp.abs(c),
                                     c.real + c.imag, jnp.conj(c) + jnp.array([1 - 1j, 2j], jnp.complex64)),
                       [_normal(2), (_normal(2) + 1j * _normal(2, seed=3)).astype(np.complex64)]),
}


@pytest.mark.parametrize("family", sorted(OP_PROGRAMS))
def test_op_family_against_jax(family):
    fn, args = OP_PROGRAMS[family]
    expected = [np.asarray(o) for o in jax.tree_util.tree_leaves(jax.jit(fn)(*args))]
    module = import_stablehlo(jax.jit(fn).lower(*args).as_text())
    got = run_module(module, args)
    assert len(got) == len(expected)
    for i, (e, g) in enumerate(zip(expected, got)):
        why = compare_arrays(e, g, 2e-5 if e.dtype != jnp.bfloat16 else 1e-2, 1e-6)
        assert why is None, f"{family} output {i}: {why}"


# -- forms, errors, round trip ----------------------------------------------------------------------
def _mlir_module(text):
    from jax._src.interpreters import mlir
    from jaxlib.mlir import ir

    with mlir.make_ir_context():
        return ir.Module.parse(text)


def test_generic_form_imports_like_pretty_form():
    fn, args = OP_PROGRAMS["reductions"]
    text = jax.jit(fn).lower(*args).as_text()
    module = _mlir_module(text)
    generic = module.operation.get_asm(print_generic_op_form=True)
    assert '"stablehlo.reduce"' in generic
    assert import_stablehlo(generic).to_string() == import_stablehlo(text).to_string()


def test_exported_object_and_module_object():
    fn, args = OP_PROGRAMS["shapes"]
    exported = jax.export.export(jax.jit(fn))(*[jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args])
    from_exported = import_stablehlo(exported)
    assert from_exported.to_string() == import_stablehlo(_mlir_module(exported.mlir_module())).to_string()
    got = run_module(from_exported, args)
    for e, g in zip(jax.tree_util.tree_leaves(jax.jit(fn)(*args)), got):
        np.testing.assert_array_equal(np.asarray(e), g)


def _op_signatures(module) -> collections.Counter:
    """(opcode, shape, attributes) of the instructions whose attributes carry the op's semantics."""
    from hlocc.hlo.attribute_syntax import attribute_kind, format_attribute_value
    from hlocc.hlo.ir import COMPUTATION_ATTRS

    opcodes = {"dot", "gather", "scatter", "convolution", "reduce-window", "select-and-scatter", "sort", "topk",
               "dynamic-slice", "dynamic-update-slice", "pad", "slice", "concatenate", "transpose", "reverse",
               "conditional", "while", "compare", "reduce", "opt-barrier", "call"}
    return collections.Counter(
        (i.opcode, i.shape.to_string(False),
         tuple(sorted((k, format_attribute_value(attribute_kind(k), v)) for k, v in i.attrs.items()
                      if k not in COMPUTATION_ATTRS)))
        for i in module.all_instructions() if i.opcode in opcodes)


SAME_AS_XLA = ["attention_f32", "batched_matmul_bf16_f32acc", "cond_predicate_tuple", "conv2d_nchw_maxpool",
               "embedding_and_grad", "int_arith_bitwise", "kv_cache_update", "onehot_iota_select", "remat_grad_sin",
               "softmax_logsoftmax_f32", "sort_topk_argsort"]


@pytest.mark.parametrize("name", SAME_AS_XLA)
def test_imported_module_is_the_ir_of_xlas_hlo(generator, name):
    """The imported module prints as HLO text that parses back, and its ops and attributes are
    those of the HLO XLA converted the same program to (the corpus .hlo)."""
    fn, args, _ = build_case(generator, name)
    module = import_stablehlo(jax.jit(fn).lower(*args).as_text())
    text = module.to_string()
    reparsed = hlocc.parse_hlo(text)
    assert reparsed.to_string() == text
    reference = hlocc.parse_hlo_file(JAX_DIR / f"{name}.hlo")
    assert reparsed.entry.program_shape == reference.entry.program_shape
    assert _op_signatures(module) == _op_signatures(reference)


HANDWRITTEN = """module @handwritten {
  func.func public @main(%p: tensor<i1>, %x: tensor<4xf32>, %s: tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>,
                                                                                  tensor<4xf32>) {
    %0 = "stablehlo.if"(%p) ({
      %a = stablehlo.multiply %x, %x : tensor<4xf32>
      stablehlo.return %a : tensor<4xf32>
    }, {
      stablehlo.return %x : tensor<4xf32>
    }) : (tensor<i1>) -> tensor<4xf32>
    %zero = stablehlo.constant dense<0> : tensor<i32>
    %one = stablehlo.constant dense<1> : tensor<i32>
    %1:2 = stablehlo.while(%i = %zero, %acc = %x) : tensor<i32>, tensor<4xf32>
      cond {
        %three = stablehlo.constant dense<3> : tensor<i32>
        %c = stablehlo.compare LT, %i, %three : (tensor<i32>, tensor<i32>) -> tensor<i1>
        stablehlo.return %c : tensor<i1>
      } do {
        %n = stablehlo.add %i, %one : tensor<i32>
        %b = stablehlo.broadcast_in_dim %s, dims = [] : (tensor<f32>) -> tensor<4xf32>
        %m = stablehlo.add %acc, %b : tensor<4xf32>
        stablehlo.return %n, %m : tensor<i32>, tensor<4xf32>
      }
    %2 = "stablehlo.map"(%x, %0) <{dimensions = array<i64: 0>}> ({
    ^bb0(%u: tensor<f32>, %v: tensor<f32>):
      %w = stablehlo.maximum %u, %v : tensor<f32>
      stablehlo.return %w : tensor<f32>
    }) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %0, %1#1, %2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  }
}"""


@pytest.mark.parametrize("pred", [True, False])
def test_if_while_with_captured_values_and_map(pred):
    """`if` branches and a `while` body that use outer values (passed in as tuple operands; a
    constant is made inside instead), `map`."""
    module = import_stablehlo(HANDWRITTEN)
    (loop,) = [i for i in module.entry.instructions if i.opcode == "while"]
    assert [str(s) for s in loop.shape.tuple_shapes] == ["s32[]", "f32[4]", "f32[]"]
    assert any(i.opcode == "constant" and i.literal == 1 for i in loop.attrs["body"].instructions)
    x = np.array([1, -2, 3, 0.5], np.float32)
    branch, loop, mapped = run_module(module, [np.bool_(pred), x, np.float32(0.25)])
    np.testing.assert_array_equal(branch, x * x if pred else x)
    np.testing.assert_array_equal(loop, x + 0.75)
    np.testing.assert_array_equal(mapped, np.maximum(x, branch))
    assert hlocc.parse_hlo(module.to_string()).to_string() == module.to_string()


SPLATS = """module @splats {
  func.func public @main() -> (tensor<3x4xbf16>, tensor<2xcomplex<f32>>, tensor<5xi1>, tensor<2x2xf32>, tensor<3xf16>) {
    %0 = stablehlo.constant dense<1.5> : tensor<3x4xbf16>
    %1 = stablehlo.constant dense<(1.0, -2.0)> : tensor<2xcomplex<f32>>
    %2 = stablehlo.constant dense<true> : tensor<5xi1>
    %3 = stablehlo.constant dense<0x7FC00000> : tensor<2x2xf32>
    %4 = stablehlo.constant dense<"0x003C0040003C"> : tensor<3xf16>
    return %0, %1, %2, %3, %4 : tensor<3x4xbf16>, tensor<2xcomplex<f32>>, tensor<5xi1>, tensor<2x2xf32>, tensor<3xf16>
  }
}"""


def test_splat_constants_are_broadcast_scalars():
    module = import_stablehlo(SPLATS)
    assert [i.opcode for i in module.entry.root.operands] == ["broadcast"] * 4 + ["constant"]
    bf16, c64, pred, nan, f16 = run_module(module, [])
    np.testing.assert_array_equal(bf16, np.full((3, 4), 1.5, jnp.bfloat16))
    np.testing.assert_array_equal(c64, np.full(2, 1 - 2j, np.complex64))
    np.testing.assert_array_equal(pred, np.ones(5, bool))
    assert np.isnan(nan).all() and nan.shape == (2, 2)
    np.testing.assert_array_equal(f16, np.array([1, 2, 1], np.float16))


def test_custom_call_keeps_target_and_config():
    def f(x):
        return jax.ffi.ffi_call("my_target", jax.ShapeDtypeStruct(x.shape, x.dtype), has_side_effect=True)(
            x, alpha=np.float32(2.0), name="n")

    module = import_stablehlo(jax.jit(f).lower(np.ones(3, np.float32)).as_text())
    (call,) = [i for i in module.all_instructions() if i.opcode == "custom-call"]
    assert call.attrs["custom_call_target"] == "my_target"
    assert call.attrs["custom_call_has_side_effect"] is True
    assert str(call.attrs["backend_config"]) == '{alpha = 2.000000e+00 : f32, name = "n"}'
    assert hlocc.parse_hlo(module.to_string()).to_string() == module.to_string()


UNKNOWN_OP = """module @m {
  func.func public @main(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
    %0 = "stablehlo.einsum"(%a, %b) <{einsum_config = "ab,bc->ac"}> : (tensor<2x3xf32>, tensor<3x4xf32>)
      -> tensor<2x4xf32>LOC
    return %0 : tensor<2x4xf32>
  }
}"""


def test_unknown_op_names_op_and_text_position():
    with pytest.raises(hlocc.UnsupportedError, match=r"^model\.mlir:3:10: StableHLO op 'stablehlo\.einsum' is not "
                                                     r"supported by hlocc's frontend$"):
        import_stablehlo(UNKNOWN_OP.replace("LOC", ""), "model.mlir")


def test_unknown_op_names_its_source_location():
    """A location in the text (as JAX writes with debug_info) names the source, callsites their
    innermost frame."""
    located = UNKNOWN_OP.replace("LOC", ' loc(callsite("einsum"("model.py":12:7) at "main.py":3:1))')
    with pytest.raises(hlocc.UnsupportedError, match=r"^model\.py:12:7: StableHLO op 'stablehlo\.einsum'"):
        import_stablehlo(located, "model.mlir")


def test_unknown_op_in_a_function_names_its_call_site():
    """JAX gives the ops of private functions name locations only; the call's location is used."""
    text = """module @m {
  func.func public @main(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
    %0 = func.call @f(%a, %b) : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32> loc("model.py":5:3)
    return %0 : tensor<2x4xf32>
  }
  func.func private @f(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
    %0 = "stablehlo.einsum"(%a, %b) <{einsum_config = "ab,bc->ac"}> : (tensor<2x3xf32>, tensor<3x4xf32>)
      -> tensor<2x4xf32> loc("einsum")
    return %0 : tensor<2x4xf32>
  }
}"""
    with pytest.raises(hlocc.UnsupportedError, match=r"^model\.py:5:3: StableHLO op 'stablehlo\.einsum'"):
        import_stablehlo(text)


def test_bounded_dimension_is_unsupported_for_now():
    text = """module @m {
  func.func public @main(%x: tensor<?xf32, #stablehlo.bounds<8>>) -> tensor<?xf32, #stablehlo.bounds<8>> {
    return %x : tensor<?xf32, #stablehlo.bounds<8>>
  }
}"""
    with pytest.raises(hlocc.UnsupportedError, match=r"dynamic dimension 0 of tensor<\?xf32, #stablehlo.bounds<8>>"):
        import_stablehlo(text)


def test_convert_from_complex_to_real_takes_the_real_part():
    """StableHLO's convert c64 -> f32 is the real part (HLO's convert refuses it: imported as real)."""
    text = """module @m {
  func.func public @main(%x: tensor<3xcomplex<f32>>) -> tensor<3xf64> {
    %y = stablehlo.convert %x : (tensor<3xcomplex<f32>>) -> tensor<3xf64>
    return %y : tensor<3xf64>
  }
}"""
    x = np.array([1.5 + 2j, -3 - 1j, 0 + 4j], np.complex64)
    for backend in ("interpreter", "cpu"):
        np.testing.assert_array_equal(hlocc.compile(text, backend)(x), np.array([1.5, -3.0, 0.0]))


def test_malformed_text_is_a_parse_error():
    with pytest.raises(hlocc.HloParseError, match=r"bad\.mlir:2:"):
        import_stablehlo("module {\n  func.func @main( -> \n}", "bad.mlir")


def test_missing_jax_names_the_extra(monkeypatch):
    """Without jax the frontend says which extra to install (importing hlocc needs no jax)."""
    import sys

    monkeypatch.setitem(sys.modules, "jax._src.interpreters.mlir", None)
    with pytest.raises(hlocc.UnsupportedError, match=r"pip install 'hlocc\[jax\]'"):
        import_stablehlo("module {}")


def test_hlocc_frontends_imports_without_jax():
    import subprocess
    import sys

    code = "import sys, hlocc.frontends; print('jax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_files_and_text_detection(tmp_path, generator):
    fn, args, _ = build_case(generator, "bias_add_tanh")
    lowered = jax.jit(fn).lower(*args)
    text = lowered.as_text()
    assert is_stablehlo_text(text) and is_stablehlo_text("// comment\n" + HANDWRITTEN)
    assert is_stablehlo_text(lowered.as_text(debug_info=True))
    assert is_stablehlo_text(_mlir_module(text).operation.get_asm(print_generic_op_form=True))
    assert not is_stablehlo_text((JAX_DIR / "bias_add_tanh.hlo").read_text())
    assert not is_stablehlo_text("ENTRY main { ROOT p = f32[] parameter(0) }")
    (tmp_path / "model.mlir").write_text(text)
    exported = jax.export.export(jax.jit(fn))(*[jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args])
    (tmp_path / "model.mlirbc").write_bytes(exported.mlir_module_serialized)
    with open(tmp_path / "plain.mlirbc", "wb") as f:
        _mlir_module(text).operation.write_bytecode(f)
    expected = import_stablehlo(text).to_string()
    assert import_stablehlo_file(tmp_path / "model.mlir").to_string() == expected
    assert import_stablehlo_file(tmp_path / "plain.mlirbc").to_string() == expected
    check_against_corpus("bias_add_tanh", run_module(import_stablehlo_file(tmp_path / "model.mlirbc"), args))
    with pytest.raises(hlocc.HloError, match="cannot read"):
        import_stablehlo_file(tmp_path / "missing.mlir")
