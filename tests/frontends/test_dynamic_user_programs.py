"""JAX programs as users write them, exported with a symbolic batch and/or sequence
(`jax.export` with `symbolic_shape`, and `hlocc.jax.jit(f, polymorphic_shapes=...)`), each compiled
once on the cpu backend and checked at several sizes (1, primes) against `jax.jit` at the concrete
size: convolutions, pooling, loops (scan, fori_loop, while_loop), vmap, top_k/sort, gathers, one-hot
embeddings, two-symbol attention, losses, integer and mixed-type ops, bf16/f16, KV-cache appends,
symbolic reshapes/transposes/pads, cumulative ops, masks and gradients. tests/frontends/test_dynamic.py
holds the property sweeps of the issue's core programs."""

import numpy as np
import pytest

jax = pytest.importorskip("jax")
if tuple(int(p) for p in jax.__version__.split(".")[:2]) < (0, 10):
    pytest.skip("the StableHLO frontend needs jax >= 0.10", allow_module_level=True)

import jax.numpy as jnp  # noqa: E402
from jax import export, lax  # noqa: E402

import hlocc  # noqa: E402
import hlocc.jax  # noqa: E402
from hlocc.comparison import compare_arrays  # noqa: E402
from hlocc.frontends.stablehlo import import_stablehlo  # noqa: E402

RNG = np.random.default_rng(1)
f32 = np.float32
W1 = RNG.standard_normal((8, 16)).astype(f32) / 3
B1 = RNG.standard_normal(16).astype(f32) / 3
W2 = RNG.standard_normal((16, 4)).astype(f32) / 4
EMB = RNG.standard_normal((10, 8)).astype(f32)
K2 = RNG.standard_normal((3, 3, 2, 4)).astype(f32) / 3  # HWIO
K1 = RNG.standard_normal((3, 2, 4)).astype(f32) / 3  # WIO
KOIHW = RNG.standard_normal((4, 2, 3, 3)).astype(f32) / 3


def conv2d_nhwc(x):
    return lax.conv_general_dilated(x, K2, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))


def conv2d_nchw(x):
    return jax.nn.relu(lax.conv_general_dilated(x, KOIHW, (2, 2), "VALID", dimension_numbers=("NCHW", "OIHW", "NCHW")))


def conv1d(x):
    return lax.conv_general_dilated(x, K1, (1,), "SAME", dimension_numbers=("NWC", "WIO", "NWC"))


def maxpool(x):
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def avgpool(x):
    return lax.reduce_window(x, 0.0, lax.add, (1, 3, 3, 1), (1, 1, 1, 1), "SAME") / 9.0


def scan_cumsum(x):
    def step(c, row):
        c = c * 0.5 + row
        return c, c.sum()
    return lax.scan(step, jnp.zeros(x.shape[1:], x.dtype), x)


def fori(x):
    return lax.fori_loop(0, 5, lambda i, c: c * 0.9 + jnp.sin(c) + i, x)


def fori_symbolic_trip(x):
    return lax.fori_loop(0, x.shape[0], lambda i, c: c + x[i], jnp.zeros(x.shape[1:], x.dtype))


def while_loop(x):
    def cond(c):
        return c[1] < 4
    def body(c):
        return c[0] * 1.5 - 0.1, c[1] + 1
    return lax.while_loop(cond, body, (x, 0))[0]


def vmapped(x, y):
    return jax.vmap(lambda a, b: jnp.dot(a, b) * a)(x, y)


def top_k(x):
    v, i = lax.top_k(x, 3)
    return v, i


def sort_argsort(x):
    return jnp.sort(x, axis=-1), jnp.argsort(x, axis=-1)


def take_indices(x, i):
    return jnp.take(x, i, axis=0)


def take_along(x, i):
    return jnp.take_along_axis(x, i, axis=1)


def embedding(tokens):
    return (jax.nn.one_hot(tokens, 10) @ EMB) + jnp.asarray(EMB)[tokens]


def einsum_attention(q, k, v):
    s = jnp.einsum("bqd,bkd->bqk", q, k) / jnp.sqrt(8.0)
    return jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(s, axis=-1), v)


def logsumexp(x):
    return jax.nn.logsumexp(x, axis=-1), jax.nn.logsumexp(x)


def cross_entropy(logits, labels):
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.take_along_axis(logp, labels[:, None], axis=-1).mean()


def where_broadcast(x, y):
    return jnp.where(x > 0, x, y[None, :]) + jnp.where(y > 0, 1.0, -1.0)


def clip_abs_sign(x):
    return jnp.clip(x, -0.5, 0.7), jnp.abs(x) * jnp.sign(x), jnp.floor(x * 3)


def integer_ops(x):
    return (x // 3) * 2 + x % 5 - jnp.abs(x), jnp.maximum(x, 1) << 1, x > 2


def bf16_mlp(x):
    return jax.nn.gelu(x @ W1.astype(jnp.bfloat16)).sum(-1)


def f16_softmax(x):
    return jax.nn.softmax(x, axis=-1) * 2


def mixed_int_float(x, n):
    return x * n.astype(jnp.float32)[:, None] + (n // 2).sum()


def kv_append(cache, new):
    return lax.dynamic_update_slice(cache, new, (cache.shape[0] - 1, 0))


def kv_append_index(cache, new, pos):
    return lax.dynamic_update_slice_in_dim(cache, new, pos, axis=0)


def merge_split(x):
    b_, s_, d = x.shape
    y = x.reshape(b_ * s_, d) @ W1[:4, :8]
    return y.reshape(b_, s_, 8).sum(1)


def transpose_sym(x):
    return jnp.transpose(x, (1, 0, 2)) * 2, x.T


def reduce_all(x):
    return x.sum(), x.max(), x.min(), jnp.prod(x * 0.1 + 1)


def cum_ops(x):
    return jnp.cumsum(x, axis=1), jnp.cumprod(x * 0.1 + 1, axis=0), lax.cummax(x, axis=0)


def pad_symbolic(x):
    n = x.shape[0]
    return jnp.pad(x, ((1, 2), (n, 0))) + 1


def repeat_tile(x):
    return jnp.repeat(x, 2, axis=0), jnp.tile(x, (1, 3))


def flip(x):
    return jnp.flip(x, axis=0) - x[::-1, ::-1]


def arange_n(x):
    return jnp.arange(x.shape[0], dtype=jnp.float32) * x.sum(-1), jnp.arange(x.shape[0])


def tril_mask(x):
    s = x.shape[0]
    return jnp.where(jnp.tril(jnp.ones((s, s), bool)), x @ x.T, 0.0), jnp.triu(x @ x.T, 1)


def grad_mlp(w1, w2, x, y):
    def loss(params):
        a, b_ = params
        return ((jax.nn.tanh(x @ a) @ b_ - y) ** 2).mean()
    return jax.grad(loss)((w1, w2))


def dropout_mask(x, noise):
    keep = noise > 0.3
    return jnp.where(keep, x / 0.7, 0.0)


def masked_mean(x, lengths):
    mask = jnp.arange(x.shape[1])[None, :] < lengths[:, None]
    return (x * mask).sum(1) / jnp.maximum(mask.sum(1), 1)


def layer_of_everything(x):
    h = jax.nn.relu(x @ W1 + B1)
    h = (h - h.mean(-1, keepdims=True)) / (h.std(-1, keepdims=True) + 1e-5)
    return jax.nn.softmax(h @ W2, axis=-1)


def argmin_max(x):
    return jnp.argmin(x, axis=0), jnp.argmax(x.reshape(-1))


def concat_self(x):
    return jnp.concatenate([x, x[::-1], x * 2], axis=0).mean(0)


def square_ops(x):
    return jnp.linalg.norm(x, axis=-1), jnp.exp(-x ** 2), jnp.tanh(x), jax.nn.sigmoid(x)


def dyn_slice_index(x, i):
    return lax.dynamic_slice_in_dim(x, i, 1, axis=0)


def gather_rows_neg(x):
    return x[jnp.array([-1, 0, -2])]


def expand_squeeze(x):
    return jnp.expand_dims(x, 1).squeeze(1) + x[:, None, :].sum(1)


def stack(x, y):
    return jnp.stack([x, y], axis=1).reshape(x.shape[0], -1)


def split(x):
    a, b_ = jnp.split(x, 2, axis=1)
    return a * b_


def var_std(x):
    return jnp.var(x, axis=0), jnp.std(x)


def median(x):
    return jnp.median(x, axis=-1), jnp.quantile(x, 0.25, axis=0)


def cumsum_reverse(x):
    return jnp.cumsum(x[::-1], axis=0)[::-1]


def rope(x):
    s = x.shape[0]
    pos = jnp.arange(s, dtype=jnp.float32)[:, None]
    freq = jnp.exp(-jnp.arange(4, dtype=jnp.float32) / 4)[None, :]
    ang = pos * freq
    x1, x2 = x[:, :4], x[:, 4:]
    return jnp.concatenate([x1 * jnp.cos(ang) - x2 * jnp.sin(ang), x1 * jnp.sin(ang) + x2 * jnp.cos(ang)], -1)


def special(x):
    return lax.erf_inv(jnp.tanh(x) * 0.9), lax.lgamma(jnp.abs(x) + 0.5), lax.digamma(jnp.abs(x) + 0.5), lax.erf(x)


def special2(x):
    return jnp.arctan(x), lax.nextafter(x, jnp.zeros_like(x)), jax.scipy.special.i1e(x), jnp.isinf(1 / x), jnp.arcsinh(x), jnp.tan(x * 0.5)


def column_at(x, i):
    return x[:, i] * 2, x[i % x.shape[0]]


def ints(lo, hi):
    """Integer arguments in [lo, hi); `hi` may name a dimension variable (an index into it)."""
    return lambda shape, rng, env: rng.integers(lo, env.get(hi, hi), shape).astype(np.int32)


F, BF16, F16 = np.float32, jnp.bfloat16, np.float16
PROGRAMS = {  # name: (function, [(symbolic shape spec, dtype or integer generator)])
    "conv2d_nhwc": (conv2d_nhwc, [("b, 6, 5, 2", F)]),
    "conv2d_nchw_strided": (conv2d_nchw, [("b, 2, 7, 7", F)]),
    "conv1d": (conv1d, [("b, 9, 2", F)]),
    "conv1d_symbolic_width": (conv1d, [("b, s, 2", F)]),
    "maxpool": (maxpool, [("b, 6, 6, 3", F)]),
    "avgpool_same": (avgpool, [("b, 5, 5, 2", F)]),
    "scan_carry": (scan_cumsum, [("s, 4", F)]),
    "fori_loop": (fori, [("b, 3", F)]),
    "fori_symbolic_trip": (fori_symbolic_trip, [("s, 3", F)]),
    "while_loop": (while_loop, [("b, 4", F)]),
    "vmap": (vmapped, [("b, 5", F), ("b, 5", F)]),
    "top_k": (top_k, [("b, 8", F)]),
    "sort_argsort": (sort_argsort, [("b, 7", F)]),
    "take_indices": (take_indices, [("b, 4", F), ("s", ints(0, "b"))]),
    "take_along_axis": (take_along, [("b, 6", F), ("b, 3", ints(0, 6))]),
    "embedding": (embedding, [("s", ints(0, 10))]),
    "einsum_attention": (einsum_attention, [("b, s, 8", F)] * 3),
    "logsumexp": (logsumexp, [("b, 9", F)]),
    "cross_entropy": (cross_entropy, [("b, 5", F), ("b", ints(0, 5))]),
    "where_broadcast": (where_broadcast, [("b, 4", F), ("4", F)]),
    "clip_abs_sign": (clip_abs_sign, [("b, 5", F)]),
    "integer_ops": (integer_ops, [("b, 3", ints(-20, 20))]),
    "bf16_mlp": (bf16_mlp, [("b, 8", BF16)]),
    "f16_softmax": (f16_softmax, [("b, 12", F16)]),
    "mixed_int_float": (mixed_int_float, [("b, 3", F), ("b", ints(-5, 5))]),
    "kv_append": (kv_append, [("s, 4", F), ("1, 4", F)]),
    "kv_append_at": (kv_append_index, [("s, 4", F), ("1, 4", F), ("", ints(0, "s"))]),
    "merge_split_b_times_s": (merge_split, [("b, s, 4", F)]),
    "transpose_symbols": (transpose_sym, [("b, s, 3", F)]),
    "reduce_all": (reduce_all, [("b, s", F)]),
    "cum_ops": (cum_ops, [("b, 4", F)]),
    "pad_symbolic": (pad_symbolic, [("b, 3", F)]),
    "repeat_tile": (repeat_tile, [("b, 3", F)]),
    "flip": (flip, [("b, 3", F)]),
    "arange_n": (arange_n, [("b, 3", F)]),
    "tril_mask": (tril_mask, [("s, 4", F)]),
    "grad_mlp": (grad_mlp, [("3, 5", F), ("5, 2", F), ("b, 3", F), ("b, 2", F)]),
    "dropout_mask": (dropout_mask, [("b, 6", F), ("b, 6", F)]),
    "masked_mean": (masked_mean, [("b, s", F), ("b", ints(0, 4))]),
    "layer_of_everything": (layer_of_everything, [("b, 8", F)]),
    "argmin_argmax": (argmin_max, [("b, 5", F)]),
    "concat_self": (concat_self, [("b, 3", F)]),
    "elementwise_math": (square_ops, [("b, 4", F)]),
    "dynamic_slice_at": (dyn_slice_index, [("b, 3", F), ("", ints(0, "b"))]),
    "negative_row_indices": (gather_rows_neg, [("b, 3", F)]),
    "expand_squeeze": (expand_squeeze, [("b, 3", F)]),
    "stack": (stack, [("b, 3", F), ("b, 3", F)]),
    "split": (split, [("b, 4", F)]),
    "var_std": (var_std, [("b, 5", F)]),
    "median_quantile": (median, [("b, 5", F)]),
    "reverse_cumsum": (cumsum_reverse, [("b, 3", F)]),
    "rope": (rope, [("s, 8", F)]),
    "special_functions": (special, [("b, 4", F)]),
    "more_special_functions": (special2, [("b, 4", F)]),
    "column_at_index": (column_at, [("b, 5", F), ("", ints(0, 5))]),
}
# Compiled in the default run (one program of each kind the frontend fixes touched: loops, gathers at a
# runtime index, convolution and pooling, a scatter-like append, a gradient); the rest slow.
DEFAULT = {
    "conv2d_nchw_strided", "maxpool", "scan_carry", "while_loop", "top_k", "take_indices", "cross_entropy",
    "kv_append_at", "merge_split_b_times_s", "grad_mlp", "column_at_index",
}
TOLERANCE = {F: 1e-5, BF16: 2e-2, F16: 1e-3}  # bf16: the corpus class
SIZES = (1, 2, 7, 13)
SEQUENCE = {1: 3, 2: 1, 3: 2, 7: 5, 13: 13, 31: 17, 64: 2}  # s for b = n: sizes that differ from b's


def concrete(spec: str, env: dict) -> tuple:
    return tuple(eval(d, {}, dict(env)) for d in spec.split(",")) if spec else ()


def arguments(specs, n: int, rng) -> list:
    env = {"b": n, "s": SEQUENCE[n]}
    return [rng.standard_normal(concrete(spec, env)).astype(kind) if isinstance(kind, type)
            else kind(concrete(spec, env), rng, env) for spec, kind in specs]


def compiler(programs: dict):
    """name → (function, specs, Executable, tolerance, sizes it ran at): one export and one
    compilation per program of `programs` (held by a module-scoped fixture)."""
    cache = {}

    def get(name):
        if name not in cache:
            fn, specs = programs[name]
            scope = export.SymbolicScope()
            structs = [jax.ShapeDtypeStruct(export.symbolic_shape(spec, scope=scope) if spec else (),
                                            kind if isinstance(kind, type) else np.int32) for spec, kind in specs]
            exported = export.export(jax.jit(fn))(*structs)
            tolerance = max((TOLERANCE[k] for _, k in specs if isinstance(k, type)), default=1e-5)
            cache[name] = fn, specs, hlocc.compile(import_stablehlo(exported), "cpu"), tolerance, set()
        return cache[name]
    return get


@pytest.fixture(scope="module")
def compiled():
    return compiler(PROGRAMS)


def check(name, fn, specs, exe, tolerance, seen: set, sizes):
    rng = np.random.default_rng(0)
    for n in sizes:
        seen.add(n)
        args = arguments(specs, n, rng)
        want = jax.tree.leaves(jax.jit(fn)(*args))
        got = exe(*args)
        got = list(got) if isinstance(got, tuple) else [got]
        assert len(got) == len(want), f"{name}: {len(got)} results, jax.jit gives {len(want)}"
        for k, (w, g) in enumerate(zip(want, got)):
            assert np.asarray(g).shape == w.shape and np.asarray(g).dtype == w.dtype, (name, n, k)
            why = compare_arrays(np.asarray(w), np.asarray(g), tolerance, tolerance)
            assert why is None, f"{name} result {k} at size {n}: {why}"
    # One plan (passes, buffer assignment) for every size; a kernel per fusion, or per size of it.
    assert exe.plan_builds == 1 and not exe.specializations, exe.plan_reason
    program = exe.program
    assert exe.compilations <= program.symbolic_kernels + len(program.deferred) * len(seen)


@pytest.mark.parametrize("name", sorted(DEFAULT))
def test_user_program_at_several_sizes(name, compiled):
    check(name, *compiled(name), SIZES)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(PROGRAMS) - DEFAULT))
def test_more_user_programs_at_several_sizes(name, compiled):
    check(name, *compiled(name), SIZES)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_user_program_size_sweep(name, compiled):
    check(name, *compiled(name), (1, 3, 31, 64, 2))


def test_hlocc_jax_jit_exports_once_for_every_size():
    """The JAX user's entry point: one export and one Executable across sizes (and both symbols)."""
    f = hlocc.jax.jit(einsum_attention, polymorphic_shapes=["b, s, 8"] * 3)
    rng = np.random.default_rng(2)
    for n in (1, 7, 2):
        args = arguments(PROGRAMS["einsum_attention"][1], n, rng)
        why = compare_arrays(np.asarray(jax.jit(einsum_attention)(*args)), f(*args), 1e-5, 1e-5)
        assert why is None, f"at size {n}: {why}"
    (signature, exe), = f.executables()
    assert exe.plan_builds == 1


def test_hlocc_jax_jit_of_a_loss_gradient_with_integer_labels():
    def loss_grad(w, x, labels):
        return jax.grad(lambda w: cross_entropy(x @ w, labels))(w)

    f = hlocc.jax.jit(loss_grad, polymorphic_shapes=[None, "b, 3", "b"])
    rng = np.random.default_rng(3)
    w = rng.standard_normal((3, 5)).astype(np.float32)
    for n in (1, 5, 11):
        x, labels = rng.standard_normal((n, 3)).astype(np.float32), rng.integers(0, 5, n).astype(np.int32)
        why = compare_arrays(np.asarray(jax.jit(loss_grad)(w, x, labels)), f(w, x, labels), 1e-5, 1e-5)
        assert why is None, f"at size {n}: {why}"
    assert len(f.executables()) == 1


@pytest.mark.parametrize("polymorphic", [False, True])
def test_hlocc_jax_jit_takes_arguments_as_jax_jit_does(polymorphic):
    """Python scalars are weakly typed (`x * 2.5` keeps bf16), numpy's 64-bit arrays become JAX's
    32-bit ones (x64 off), an int beyond int32 and a list (a pytree to jax.jit) are ArgumentErrors."""
    def shapes(*specs):
        return list(specs) if polymorphic else None

    x = np.arange(5, dtype=np.float32)
    scale = hlocc.jax.jit(lambda x, k: x * k, polymorphic_shapes=shapes("b", None))
    np.testing.assert_array_equal(scale(x, 3), x * 3)
    half = jnp.ones(4, jnp.bfloat16)
    got = scale(np.asarray(half), 2.5)
    assert got.dtype == jax.jit(lambda x, k: x * k)(half, 2.5).dtype == jnp.bfloat16
    take = hlocc.jax.jit(lambda x, i: x[i], polymorphic_shapes=shapes("b", "s"))
    np.testing.assert_array_equal(take(x, np.array([4, 0, 2])), x[[4, 0, 2]])  # int64 indices
    double = hlocc.jax.jit(lambda x: x * 2, polymorphic_shapes=shapes("b"))
    assert double(np.arange(3.0)).dtype == np.float32  # float64 in, as jax.jit
    with pytest.raises(hlocc.ArgumentError, match="Python int 1099511627776 is out of range for int32"):
        scale(x, 2**40)
    with pytest.raises(hlocc.ArgumentError, match="argument 0 is a list: hlocc.jax.jit takes arrays"):
        double([[1.0, 2.0], [3.0]])


CHLO_ON_SYMBOLIC_BATCH = """module @m {
  func.func public @main(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
    %y = chlo.lgamma %x : tensor<?x4xf32> -> tensor<?x4xf32>
    return %y : tensor<?x4xf32>
  }
}"""


def test_chlo_expansion_on_a_symbolic_batch():
    """XLA's expansion of chlo.lgamma is replayed at the operand's symbolic shape (its result type
    says a bare `?`: the broadcast constants once had no size)."""
    import math

    exe = hlocc.compile(import_stablehlo(CHLO_ON_SYMBOLIC_BATCH), "interpreter")
    for n in (1, 3):
        x = np.abs(RNG.standard_normal((n, 4))).astype(np.float32) + 0.5
        np.testing.assert_allclose(exe(x), np.vectorize(math.lgamma)(x), rtol=1e-5, atol=1e-5)


def test_dynamic_gather_of_a_runtime_index_is_a_dynamic_slice():
    """`x[:, i]` on a symbolic batch: JAX's dynamic_gather with a runtime start (not a slice) imports
    as dynamic-slice (which clamps as gather does) and a reshape; its symbolic slice sizes print and
    parse back as `?(b)`."""
    from hlocc.hlo.parser import parse_hlo

    exported = export.export(jax.jit(lambda x, i: x[:, i]))(
        jax.ShapeDtypeStruct(export.symbolic_shape("b, 5"), jnp.float32), jax.ShapeDtypeStruct((), jnp.int32))
    module = import_stablehlo(exported)
    text = module.to_string()
    line = next(li.strip() for li in text.splitlines() if "dynamic_slice_sizes" in li)
    assert line.endswith("dynamic_slice_sizes={?(b),1}"), text
    assert line in parse_hlo(text).to_string()
    exe = hlocc.compile(module, "interpreter")
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    for i in (0, 4, 7, -1):  # gather clamps an index past the end; jax.jit wraps negatives first
        np.testing.assert_array_equal(exe(x, np.int32(i)), np.asarray(jax.jit(lambda x, i: x[:, i])(x, i)))
