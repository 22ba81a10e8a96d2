"""Shape-polymorphic JAX programs (jax.export with symbolic shapes) imported with symbolic
dimensions and run at many sizes against jax.jit at the concrete size."""

import numpy as np
import pytest

jax = pytest.importorskip("jax")
if tuple(int(p) for p in jax.__version__.split(".")[:2]) < (0, 10):
    pytest.skip("the StableHLO frontend needs jax >= 0.10", allow_module_level=True)

import jax.numpy as jnp  # noqa: E402
from jax import export  # noqa: E402

import hlocc  # noqa: E402
import hlocc.jax  # noqa: E402
from hlocc.comparison import compare_arrays  # noqa: E402
from hlocc.frontends.stablehlo import import_stablehlo  # noqa: E402

RNG = np.random.default_rng(0)
W1 = RNG.standard_normal((32, 64)).astype(np.float32) / 6
W2 = RNG.standard_normal((64, 16)).astype(np.float32) / 8
GAMMA = RNG.standard_normal(64).astype(np.float32)
WQ = RNG.standard_normal((16, 16)).astype(np.float32) / 4


def softmax(x):
    return jax.nn.softmax(x, axis=-1)


def layernorm(x):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / jnp.sqrt(var + 1e-5) * GAMMA + x.mean()


def mlp(x):
    return jax.nn.relu(x @ W1) @ W2


def cumsum(x):
    return jnp.cumsum(x, axis=0)


def slice_pad(x):
    return jnp.pad(x[1:], ((2, 1), (0, 0))) * 2


def concat(x, y):
    return jnp.concatenate([x, y * 2], axis=0)


def argmax(x):
    return jnp.argmax(x, axis=1), jnp.argmax(x, axis=0)


def attention(x):
    """Causal self-attention over a symbolic sequence length."""
    scores = (x @ WQ) @ x.T / 4.0
    causal = jnp.tril(jnp.ones((x.shape[0], x.shape[0]), bool))
    return jax.nn.softmax(jnp.where(causal, scores, -1e9), axis=-1) @ x


def rmsnorm_bf16(x):
    xf = x.astype(jnp.float32)
    return (xf * jax.lax.rsqrt((xf * xf).mean(-1, keepdims=True) + 1e-6)).astype(jnp.bfloat16)


b, c = export.symbolic_shape("b, c")
PROGRAMS = {  # name: (function, symbolic arg shapes, concrete arg shapes for size n)
    "softmax": (softmax, [(b, 128)], lambda n: [(n, 128)]),
    "layernorm": (layernorm, [(b, 64)], lambda n: [(n, 64)]),
    "mlp": (mlp, [(b, 32)], lambda n: [(n, 32)]),
    "cumsum": (cumsum, [(b, 4)], lambda n: [(n, 4)]),
    "slice_pad": (slice_pad, [(b, 8)], lambda n: [(n, 8)]),
    "concat": (concat, [(b, 4), (c, 4)], lambda n: [(n, 4), (n % 5 + 1, 4)]),
    "argmax": (argmax, [(b, 10)], lambda n: [(n, 10)]),
    "attention": (attention, [(b, 16)], lambda n: [(n, 16)]),
    "rmsnorm_bf16": (rmsnorm_bf16, [(b, 32)], lambda n: [(n, 32)]),
}
b_s = export.symbolic_shape("b, s")
MORE_PROGRAMS = {  # smaller programs each exercising one more way JAX computes shapes
    "reshape_flat": (lambda x: x.reshape(-1) * 2, [(b, 4)]),
    "reshape_split": (lambda x: x.reshape(x.shape[0], 2, 2).sum(-1), [(b, 4)]),
    "mean_over_symbol": (lambda x: x.mean(axis=0), [(b, 4)]),
    "sort": (lambda x: jnp.sort(x, axis=0), [(b, 4)]),
    "one_hot": (lambda x: jax.nn.one_hot(jnp.argmax(x, -1), 4), [(b, 4)]),
    "batched_matmul": (lambda x, y: jnp.einsum("bij,bjk->bik", x, y), [(b, 3, 4), (b, 4, 5)]),
    "outer": (lambda x: x[:, None] * x[None, :], [(b,)]),
    "gram": (lambda x: x.T @ x, [(b, 4)]),
    "dynamic_slice": (lambda x: jax.lax.dynamic_slice_in_dim(x, 1, 2, axis=1), [(b, 4)]),
    "take_rows": (lambda x: x[jnp.array([0, 0])], [(b, 4)]),
    "last_row": (lambda x: x[-1], [(b, 4)]),
    "tile": (lambda x: jnp.tile(x, (2, 1)), [(b, 4)]),
    "two_symbols": (lambda x: jax.nn.softmax(x, axis=1).sum(0), [b_s]),
    "cumprod": (lambda x: jnp.cumprod(x, axis=0), [(b, 3)]),
    "pad": (lambda x: jnp.pad(x, ((0, 3), (1, 1))), [(b, 4)]),
    "where_max": (lambda x: jnp.where(x > 0, x, 0).max(), [(b, 4)]),
    "arange": (lambda x: x + jnp.arange(x.shape[0])[:, None], [(b, 4)]),
    # a gather of iota-computed columns whose slice sizes are symbolic (every row: JAX emits a
    # dynamic_gather where another dimension is symbolic too)
    "reversed": (lambda x: x[:, ::-1] * 2, [b_s]),
    "strided": (lambda x: x[1:, ::2] * 2, [b_s]),
}
DTYPES = {"rmsnorm_bf16": jnp.bfloat16}
_IMPORTED = {}


def imported(name):
    if name not in _IMPORTED:
        f, shapes, _ = PROGRAMS[name]
        dtype = DTYPES.get(name, jnp.float32)
        exported = export.export(jax.jit(f))(*[jax.ShapeDtypeStruct(s, dtype) for s in shapes])
        _IMPORTED[name] = import_stablehlo(exported)
    return _IMPORTED[name]


def check_sizes(name, backend, sizes, **options):
    f, _, concrete = PROGRAMS[name]
    dtype = DTYPES.get(name, np.float32)
    # A cumsum of 1000 f32 elements is a long sum (the corpus policy's 1e-4 class), in another order
    # than XLA's scan.
    tolerance = 2e-2 if dtype == jnp.bfloat16 else 1e-4 if name == "cumsum" else 1e-5  # bf16: the corpus class
    exe = hlocc.compile(imported(name), backend, **options)
    compiled = exe.compilations
    for n in sizes:
        args = [RNG.standard_normal(s).astype(dtype) for s in concrete(n)]
        check_outputs(f"{name} at size {n} on {backend}", jax.jit(f)(*args), exe(*args), tolerance)
        assert exe.compilations == compiled, f"{name}: a compilation at size {n}"
    if backend == "interpreter":  # a whole-module specialization per size, nothing compiled
        assert exe.compilations == 0 and len(exe.specializations) == len(set(sizes))
        return exe
    check_one_compile(exe)
    return exe


def check_outputs(what, want, got, tolerance):
    for w, g in zip(jax.tree.leaves(want), got if isinstance(got, tuple) else [got]):
        why = compare_arrays(np.asarray(w), np.asarray(g), tolerance, tolerance)
        assert why is None, f"{what}: {why}"


def check_one_compile(exe):
    """One plan (passes, buffer assignment) and one compilation for every size: every fusion a
    kernel with runtime dims (`compilations` counts the plan's kernels as one, as the static path
    counts a program), none compiled per size, and `--stats` lists none."""
    program = exe.program
    assert exe.plan_builds == 1 and not exe.specializations, exe.plan_reason
    assert not program.deferred, program.fallbacks()
    assert exe.compilations == int(program.symbolic_kernels > 0)
    assert f"{program.symbolic_kernels} kernel(s) for every size, 0 compiled per size" in exe.stats_text()
    assert "compiled per size (" not in exe.stats_text()


@pytest.mark.parametrize("name", PROGRAMS)
def test_interpreter_at_many_sizes(name):
    check_sizes(name, "interpreter", [1, 2, 13, 1])


@pytest.mark.parametrize("name", ["softmax", "concat"])
def test_cpu_at_two_sizes(name):
    exe = check_sizes(name, "cpu", [1, 13])
    assert "one plan for every size" in exe.stats_text()


@pytest.mark.slow
@pytest.mark.parametrize("name", PROGRAMS)
def test_interpreter_size_sweep(name):
    check_sizes(name, "interpreter", [1, 2, 3, 5, 11, 31, 64, 127, 257, 1000])


@pytest.mark.slow
@pytest.mark.parametrize("name", PROGRAMS)
def test_cpu_size_sweep(name):
    check_sizes(name, "cpu", [1, 2, 3, 5, 11, 31, 64, 127, 129, 257, 1000])


def test_cpu_softmax_rows_past_a_block():
    """129 rows: one more than a CPU block of rows (the last block's spare threads once wrote past
    the side output); attention at sequence length 1 (rows of one element)."""
    check_sizes("softmax", "cpu", [129])
    check_sizes("attention", "cpu", [1])


@pytest.mark.parametrize("name", MORE_PROGRAMS)
def test_more_programs_on_the_interpreter(name):
    f, shapes = MORE_PROGRAMS[name]
    exported = export.export(jax.jit(f))(*[jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes])
    exe = hlocc.compile(import_stablehlo(exported), "interpreter")
    for n in (1, 5):
        args = [RNG.standard_normal([n if not isinstance(d, int) else d for d in s]).astype(np.float32)
                for s in shapes]
        why = compare_arrays(np.asarray(jax.jit(f)(*args)), exe(*args), 1e-5, 1e-5)
        assert why is None, f"{name} at size {n}: {why}"


# the programs whose fusions were compiled per size before gather, dynamic-slice and reduce-window
# had kernels with runtime dims (one_hot's argmax once broke stitch fusion), and sort (a library call)
INDEXING = ["cumprod", "take_rows", "last_row", "one_hot", "sort", "dynamic_slice", "tile", "arange", "reversed",
            "strided"]


@pytest.mark.parametrize("name", INDEXING)
def test_more_programs_compile_once_inside_their_buffers(name):
    """Sizes 1, primes and past a block, bounds-checked kernels (a BoundsCheckError on any access
    outside a buffer): one compilation for all of them."""
    f, shapes = MORE_PROGRAMS[name]
    exported = export.export(jax.jit(f))(*[jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes])
    exe = hlocc.compile(import_stablehlo(exported), "cpu", check_bounds=True)
    for n in (1, 2, 3, 13, 37, 131):
        x = RNG.standard_normal([n if not isinstance(d, int) else d for d in shapes[0]]).astype(np.float32)
        check_outputs(f"{name} at size {n}", jax.jit(f)(x), exe(x), 1e-5)
    check_one_compile(exe)


@pytest.mark.parametrize("name", ["cumsum", "argmax"])
def test_cumsum_and_argmax_bounds_checked_at_primes(name):
    check_sizes(name, "cpu", [1, 2, 3, 5, 37, 101], check_bounds=True)


SCATTERS = {  # name: (function, symbolic arg shapes; a 1-D argument holds int32 ids)
    "scatter_add": (lambda x: x.at[jnp.array([0, 2, 0])].add(1.0), [(b, 4)]),  # row 2 is dropped at b <= 2
    "segment_sum": (lambda x, ids: jax.ops.segment_sum(x, ids, num_segments=5), [(b, 4), (b,)]),
    "set_rows": (lambda x, v: x.at[jnp.arange(x.shape[0]) % 3].set(v), [(b, 4), (b, 4)]),
}


@pytest.mark.parametrize("name", SCATTERS)
def test_scatters_compile_once_inside_their_buffers(name):
    """The scatter emitter over a symbolic operand and symbolic updates, ids out of range included."""
    f, shapes = SCATTERS[name]
    dtypes = [jnp.int32 if len(s) == 1 else jnp.float32 for s in shapes]
    exported = export.export(jax.jit(f))(*[jax.ShapeDtypeStruct(s, d) for s, d in zip(shapes, dtypes)])
    exe = hlocc.compile(import_stablehlo(exported), "cpu", check_bounds=True)
    for n in (1, 2, 3, 13, 37):
        args = [RNG.integers(-2, 7, n).astype(np.int32) if d == jnp.int32 else
                RNG.standard_normal([n if not isinstance(x, int) else x for x in s]).astype(np.float32)
                for s, d in zip(shapes, dtypes)]
        check_outputs(f"{name} at size {n}", jax.jit(f)(*args), exe(*args), 1e-5)
    check_one_compile(exe)


def test_softmax_imports_with_one_symbol_and_no_dynamic_op():
    from hlocc.passes.pipeline import run_passes

    module = imported("softmax")
    run_passes(module, ["shape-constraints"])
    shapes = [i.shape for comp in module.computations for i in comp.instructions]
    assert frozenset().union(*(s.symbols for s in shapes)) == {"b"}
    assert "dynamic" not in module.to_string().replace("dynamic shape", "")
    assert "f32[?b,128]" in module.to_string()


def test_zero_size_breaks_jax_shape_assertion():
    exe = hlocc.compile(imported("softmax"), "interpreter")
    with pytest.raises(hlocc.ArgumentError, match="Expected value >= 1 for dimension variable 'b'.*'b' = 0"):
        exe(np.zeros((0, 128), np.float32))


def test_inconsistent_sizes_name_the_symbol_and_both_values():
    def add(x, y):
        return x + y

    exported = export.export(jax.jit(add))(*[jax.ShapeDtypeStruct((b, 4), jnp.float32)] * 2)
    exe = hlocc.compile(import_stablehlo(exported), "interpreter")
    with pytest.raises(hlocc.ArgumentError, match=r"argument 1 dimension 0: size 5 does not match 'b' = 3 with "
                                                  r"b = 3 \(from argument 0 dimension 0 = 3\)"):
        exe(np.zeros((3, 4), np.float32), np.zeros((5, 4), np.float32))


def test_new_rank_is_a_clear_error():
    exe = hlocc.compile(imported("softmax"), "interpreter")
    with pytest.raises(hlocc.ArgumentError, match="expected rank 2.*a new rank needs a new compilation"):
        exe(np.zeros((3, 128, 1), np.float32))



@pytest.mark.parametrize(("fn", "spec", "op", "good", "bad"), [
    (lambda x: x[:2] * 2, "n, 3", "minimum", [(2, 3), (5, 3)], (1, 3)),  # min(n, 2): 1 at n = 1, else 2
    # SAME pooling with a window below its stride: padding max(..., 0), negative at n = 3, 6, ...
    (lambda x: jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (2,), (3,), "SAME"), "n", "maximum", [(4,), (5,), (8,)],
     (6,)),
])
def test_a_size_computed_with_min_or_max_takes_the_large_sizes_and_a_guard(fn, spec, op, good, bad):
    """A min/max of a size and a constant that the algebra cannot order for every size: the plan
    takes the order of large sizes, and the sizes where it fails are refused naming the op (the
    whole program was refused, with "min/max of dimension sizes is not supported")."""
    exported = export.export(jax.jit(fn))(jax.ShapeDtypeStruct(export.symbolic_shape(spec), jnp.float32))
    exe = hlocc.compile(exported, "cpu")
    for shape in good:
        x = RNG.standard_normal(shape).astype(np.float32)
        check_outputs(f"{op} at {shape}", fn(x), exe(x), 1e-6)
    with pytest.raises(hlocc.ArgumentError, match=rf"stablehlo.{op}: this program's plan takes"):
        exe(np.ones(bad, np.float32))


def test_a_min_that_the_variables_ranges_decide_is_a_size():
    """`flat[:b]` of an a*b vector has size min(a*b, b), which is b for variables >= 1 (JAX's guards
    check that): one compile, right where a = 1 makes them equal."""
    def fn(x, y):
        return (x[:, None] + y[None, :]).reshape(-1)[: y.shape[0]]

    a, b_ = export.symbolic_shape("a, b")
    exported = export.export(jax.jit(fn))(jax.ShapeDtypeStruct((a,), jnp.float32), jax.ShapeDtypeStruct((b_,), jnp.float32))
    exe = hlocc.compile(import_stablehlo(exported), "cpu")
    for na, nb in ((1, 4), (3, 4), (5, 2), (1, 1), (2, 7)):
        x, y = RNG.standard_normal(na).astype(np.float32), RNG.standard_normal(nb).astype(np.float32)
        check_outputs(f"a={na} b={nb}", jax.jit(fn)(x, y), exe(x, y), 1e-6)
    check_one_compile(exe)

def test_strided_slice_of_a_multiple_and_its_divisibility_guard():
    def every_other(x):
        return x[::2] * 3

    exported = export.export(jax.jit(every_other))(jax.ShapeDtypeStruct(export.symbolic_shape("2*b, 4"),
                                                                         jnp.float32))
    module = import_stablehlo(exported)
    assert "Arg_0 = f32[?(2*b),4] parameter(0)" in module.to_string()  # written in JAX's variable
    assert [str(g.predicate) for g in module.guards] == ["b >= 1"]
    exe = hlocc.compile(module, "interpreter")
    for n in (2, 6, 14):
        x = RNG.standard_normal((n, 4)).astype(np.float32)
        np.testing.assert_array_equal(exe(x), np.asarray(every_other(x)))
    with pytest.raises(hlocc.ArgumentError, match=r"argument 0 dimension 0: size 5 is not of the form '2\*b'"):
        exe(np.zeros((5, 4), np.float32))


@pytest.mark.parametrize(("spec", "fn"), [
    ("b, 2*n", lambda x: x * 2 + x.sum()),          # a broadcast written 2*n against the argument's dim
    ("b, n+3", lambda x: x[:, :3] - x[:, 3:].sum(axis=1, keepdims=True)),  # static slices JAX proved fit
    ("b, n+1", lambda x: jax.lax.top_k(x, 2)[0]),
], ids=["broadcast_of_a_multiple", "static_slices", "top_k"])
def test_entry_dimensions_are_their_variables_expressions_from_the_start(spec, fn):
    """`2*n` and `n+3` entry dimensions are written in their variable before the body is imported
    (dimension_renaming): the body's `2*n` is then the argument's size itself, and `3 <= n + 3`
    provable. Written after the import, `x * 2` compared `2*floordiv(arg0_1, 2)` with `arg0_1`."""
    exported = export.export(jax.jit(fn))(jax.ShapeDtypeStruct(export.symbolic_shape(spec), jnp.float32))
    exe = hlocc.compile(exported, "interpreter")
    assert "arg0" not in exe.module.to_string()
    for n in (4, 6, 10):
        x = RNG.standard_normal((3, n)).astype(np.float32)
        np.testing.assert_allclose(exe(x), np.asarray(jax.jit(fn)(x)), rtol=1e-5, atol=1e-5)  # (a sum: its order)


def test_a_later_arguments_derived_dimension_is_its_expression():
    """b's `3*m` is only a shape assertion `arg1_0 == 3*m` of @main: b's dimension is written `3*m`."""
    scope = export.SymbolicScope()
    specs = [jax.ShapeDtypeStruct(export.symbolic_shape(s, scope=scope), jnp.float32) for s in ("m, 3", "3*m")]
    exported = export.export(jax.jit(lambda a, b: a.reshape(-1) + b))(*specs)
    exe = hlocc.compile(exported, "interpreter")
    assert "f32[?(3*m)] parameter(1)" in exe.module.to_string()
    for m in (1, 4):
        a, b = RNG.standard_normal((m, 3)).astype(np.float32), RNG.standard_normal(3 * m).astype(np.float32)
        np.testing.assert_array_equal(exe(a, b), a.reshape(-1) + b)
    with pytest.raises(hlocc.ArgumentError, match=r"argument 1 dimension 0: size 5 does not match '3\*m' = 6"):
        exe(np.zeros((2, 3), np.float32), np.zeros(5, np.float32))


@pytest.mark.parametrize(("spec", "fn"), [("n, n", jnp.linalg.cholesky), ("n, n", jnp.linalg.inv),
                                        ("b, 3, 3", lambda a: jnp.linalg.solve(a, a[..., :1])),
                                        ("n, n", lambda a: jnp.linalg.svd(a, compute_uv=False)),
                                        ("b, 3, 3", lambda a: jnp.sort(jnp.linalg.eigvals(a).real))],
                         ids=["cholesky", "inv", "batched_solve", "singular_values", "eigvals"])
def test_lapack_calls_over_symbolic_sizes_are_one_compile(spec, fn):
    """JAX passes a LAPACK call's symbolic result shapes as shape operands (`indices_of_shape_operands`):
    they are the custom call's result dims, not operands, and the call runs at each binding. The
    results a call does not compute (gesdd's u and vt without vectors, geev's eigenvectors) are
    buffers at the binding's sizes too."""
    exported = export.export(jax.jit(fn))(jax.ShapeDtypeStruct(export.symbolic_shape(spec), jnp.float32))
    exe = hlocc.compile(exported, "cpu")
    for n in (2, 5):
        a = RNG.standard_normal((n, n) if spec == "n, n" else (n, 3, 3)).astype(np.float32)
        a = a @ np.swapaxes(a, -1, -2) + 3 * np.eye(a.shape[-1], dtype=np.float32)
        np.testing.assert_allclose(exe(a), np.asarray(jax.jit(fn)(a)), rtol=1e-4, atol=1e-4)


def test_strided_same_convolution_over_a_symbolic_image_is_one_compile():
    """JAX writes SAME padding with a stride over a symbolic size as stablehlo.dynamic_conv, its
    padding a shape tensor of floordivs: a convolution with symbolic padding (a CNN's first layer)."""
    w = RNG.standard_normal((3, 3, 3, 4)).astype(np.float32)

    def conv(x):
        return jax.lax.conv_general_dilated(x, w, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))

    exported = export.export(jax.jit(conv))(jax.ShapeDtypeStruct(export.symbolic_shape("b, h, w, 3"), jnp.float32))
    exe = hlocc.compile(exported, "cpu")
    for h, w_ in ((7, 8), (8, 13), (16, 5)):
        x = RNG.standard_normal((2, h, w_, 3)).astype(np.float32)
        np.testing.assert_allclose(exe(x), np.asarray(jax.jit(conv)(x)), rtol=1e-4, atol=1e-4)
    assert exe.compilations <= 1


DYNAMIC_OPS = """module @m {
  func.func public @main(%x: tensor<?x4xf32>) -> (tensor<?x4xf32>, tensor<?xf32>, tensor<?xi32>) {
    %n = stablehlo.get_dimension_size %x, dim = 0 : (tensor<?x4xf32>) -> tensor<i32>
    %one = stablehlo.constant dense<1> : tensor<1xi32>
    %zero = stablehlo.constant dense<0> : tensor<1xi32>
    %four = stablehlo.constant dense<4> : tensor<1xi32>
    %n1 = stablehlo.reshape %n : (tensor<i32>) -> tensor<1xi32>
    %start = stablehlo.concatenate %one, %zero, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
    %limit = stablehlo.concatenate %n1, %four, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
    %stride = stablehlo.concatenate %one, %one, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
    %s = stablehlo.real_dynamic_slice %x, %start, %limit, %stride
        : (tensor<?x4xf32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>) -> tensor<?x4xf32>
    %pv = stablehlo.constant dense<5.0> : tensor<f32>
    %lo = stablehlo.concatenate %n1, %zero, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
    %hi = stablehlo.concatenate %zero, %zero, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
    %p = stablehlo.dynamic_pad %s, %pv, %lo, %hi, %hi
        : (tensor<?x4xf32>, tensor<f32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>) -> tensor<?x4xf32>
    %four_s = stablehlo.constant dense<4> : tensor<i32>
    %m = stablehlo.multiply %n, %four_s : tensor<i32>
    %m1 = stablehlo.reshape %m : (tensor<i32>) -> tensor<1xi32>
    %flat = stablehlo.dynamic_reshape %x, %m1 : (tensor<?x4xf32>, tensor<1xi32>) -> tensor<?xf32>
    %io = stablehlo.dynamic_iota %n1, dim = 0 : (tensor<1xi32>) -> tensor<?xi32>
    return %p, %flat, %io : tensor<?x4xf32>, tensor<?xf32>, tensor<?xi32>
  }
}"""


def test_dynamic_ops_of_hand_written_stablehlo():
    """No JAX wrapper: the `?` is named after its place (`arg0_0`); shapes come from shape tensors."""
    module = import_stablehlo(DYNAMIC_OPS)
    text = module.to_string()
    assert "f32[?(2*arg0_0-1),4] pad(" in text and "padding=?(arg0_0)_0x0_0" in text
    assert "slice={[1:?(arg0_0)], [0:4]}" in text and "f32[?(4*arg0_0)] reshape(" in text
    exe = hlocc.compile(module, "interpreter")
    for n in (1, 3):
        x = np.arange(n * 4, dtype=np.float32).reshape(n, 4)
        padded, flat, iota = exe(x)
        np.testing.assert_array_equal(padded, np.pad(x[1:], ((n, 0), (0, 0)), constant_values=5))
        np.testing.assert_array_equal(flat, x.reshape(-1))
        np.testing.assert_array_equal(iota, np.arange(n))


def test_size_zero_and_one_run_a_module_without_guards():
    text = """HloModule m

ENTRY e {
  p = f32[?n,3] parameter(0)
  ROOT r = f32[?n,3] add(p, p)
}
"""
    exe = hlocc.compile(text, "interpreter")
    for n in (0, 1, 4):
        x = np.ones((n, 3), np.float32)
        np.testing.assert_array_equal(exe(x), 2 * x)
    assert exe.compilations == 0 and len(exe.specializations) == 3  # the interpreter builds nothing
    assert "n=0" in exe.stats_text() and "whole module per size" in exe.stats_text()
    # The CLI's argument check takes any size for a symbolic dimension (binding checks them later).
    from hlocc.compiler import check_arguments

    assert check_arguments(exe.module, [np.ones((7, 3), np.float64)], cast=True)[0].dtype == np.float32


def test_a_symbolic_row_length_divides_by_the_bound_size_not_by_the_evaluator():
    """JAX's mean over a symbolic row divides by get-dimension-size: a scalar step writing the
    binding's size (it ran the evaluator at every call, most of a small layernorm's host time)."""
    def row_layernorm(x):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) * jax.lax.rsqrt(var + 1e-5)

    exported = export.export(jax.jit(row_layernorm))(
        jax.ShapeDtypeStruct(export.symbolic_shape("b, n"), jnp.float32))
    exe = hlocc.compile(import_stablehlo(exported), "cpu")
    for shape in [(3, 5), (1, 1), (7, 33), (2, 1000), (3, 5)]:
        x = RNG.standard_normal(shape).astype(np.float32)
        why = compare_arrays(np.asarray(jax.jit(row_layernorm)(x)), exe(x), 1e-5, 1e-5)
        assert why is None, f"at {shape}: {why}"
    described = exe.program.to_string()
    assert "get-dimension-size: the size n written" in described, described
    assert "by the evaluator" not in described, described


def test_pooling_over_symbolic_image_sizes_compiles_once():
    """A window over symbolic spatial dimensions has JAX's size `floordiv(h - 2, 2) + 1` (the shape
    rules cannot decide whether the window fits), SAME padding the sizes of JAX's integer division
    of `-h`, odd or even: one compile for every image size, and a guard
    names the window where the image is too small for it (XLA's output would be empty there)."""
    from jax import lax

    def pools(x):  # SAME pads by floordiv(-h, 2), which JAX computes with jnp.floor_divide
        return (lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID"),
                lax.reduce_window(x, 0.0, lax.add, (1, 3, 3, 1), (1, 1, 1, 1), "VALID"),
                lax.reduce_window(x, 0.0, lax.add, (1, 2, 3, 1), (1, 2, 2, 1), "SAME"))

    spec = export.symbolic_shape("b, h, w, 3")
    exe = hlocc.compile(export.export(jax.jit(pools))(jax.ShapeDtypeStruct(spec, jnp.float32)), "cpu",
                        check_bounds=True)
    for shape in [(2, 5, 7, 3), (1, 3, 3, 3), (3, 4, 10, 3), (1, 6, 3, 3), (1, 9, 4, 3)]:
        x = RNG.standard_normal(shape).astype(np.float32)
        check_outputs(f"pools at {shape}", pools(x), exe(x), 1e-5)
    check_one_compile(exe)
    with pytest.raises(hlocc.errors.ArgumentError, match=r"reduce-window '.*': the window does not fit dimension 1 "
                                                         r"of its padded operand \(an output size h - 2 = -1\)"):
        exe(np.zeros((1, 1, 4, 3), np.float32))


def test_a_second_integer_division_function_is_recognised_too():
    """JAX names the second private `divmod` of a module `divmod_0`: jnp.roll after a `b // 2`
    slice divides by the size in it (refused as 'not a shape computed from dimension sizes')."""
    def f(x):
        return x[x.shape[0] // 2:], jnp.roll(x, 1, 0)

    import hlocc.jax

    run = hlocc.jax.jit(f, polymorphic_shapes=["b, 2"])
    for n in (1, 5, 8):
        x = RNG.standard_normal((n, 2)).astype(np.float32)
        check_outputs(f"slice and roll at {n}", f(x), run(x), 0)


def test_a_tail_slice_of_a_symbolic_size_runs_where_the_size_holds_it():
    """x[-3:] starts at max(b - 3, 0) and keeps min(3, b) rows, which the algebra cannot order for
    every b: the plan takes b >= 3, and a guard refuses smaller sizes by name (it was refused)."""
    import hlocc.jax

    def f(x):
        return x[-3:], x[:4]

    run = hlocc.jax.jit(f, polymorphic_shapes=["b, 2"])
    for n in (4, 9, 5):
        x = RNG.standard_normal((n, 2)).astype(np.float32)
        check_outputs(f"tail at {n}", f(x), run(x), 0)
    with pytest.raises(hlocc.errors.ArgumentError, match=r"stablehlo.maximum: this program's plan takes b - 3 >= 0 .* "
                                                         r"which fails here: b - 3 = -1"):
        run(np.ones((2, 2), np.float32))


@pytest.mark.parametrize("x, y", [(7, 2), (-7, 2), (7, -2), (-7, -2), (-6, 3), (0, 5)])
def test_shape_division_truncates_as_stablehlo_does(x, y):
    """The size rules of StableHLO's integer divide and remainder round toward zero (C's, not
    Python's) on constants and on symbolic sizes of a known sign."""
    from hlocc.frontends.dynamic_shapes import SIZE_RULES
    from hlocc.hlo.symbolic import symbol

    divide, remainder = SIZE_RULES["stablehlo.divide"], SIZE_RULES["stablehlo.remainder"]
    want_q, want_r = int(x / y), x - y * int(x / y)
    assert divide(None, [x], [y]) == [want_q] and remainder(None, [x], [y]) == [want_r]
    h = symbol("h")  # h >= 1: x*h has x's sign
    for n in (1, 2, 3, 10):
        q, r = (v[0].evaluate({"h": n}) if hasattr(v[0], "evaluate") else v[0]
                for v in (divide(None, [x * h], [y]), remainder(None, [x * h], [y])))
        assert (q, r) == (int(x * n / y), x * n - y * int(x * n / y)), n


def test_random_bits_over_a_symbolic_shape_are_one_compile():
    """JAX exports rng_bit_generator over a symbolic shape as the custom call
    `stablehlo.dynamic_rng_bit_generator(state, shape)`: rng-bit-generator whose bits have the
    shape tensor's sizes, the same bits as XLA's at every size (JAX's "rbg" keys draw through it)."""
    def bits(key, x):
        return jax.lax.rng_bit_generator(key, x.shape, dtype=jnp.uint32)[1]

    def normal(x):
        return x + jax.random.normal(jax.random.key(3, impl="rbg"), x.shape)

    key = np.array([1, 2, 3, 4], np.uint32)
    exe = hlocc.jax.jit(bits, polymorphic_shapes=[None, "b, 3"])
    noisy = hlocc.jax.jit(normal, polymorphic_shapes=["b, 3"])
    for b in (1, 5, 17):
        x = np.zeros((b, 3), np.float32)
        np.testing.assert_array_equal(exe(key, x), np.asarray(jax.jit(bits)(key, x)))
        np.testing.assert_allclose(noisy(x), np.asarray(jax.jit(normal)(x)), rtol=1e-6, atol=1e-6)
    for f in (exe, noisy):
        (_, compiled), = f.executables()
        assert compiled.compilations <= 1  # (the generator itself runs on the host: no kernel)
