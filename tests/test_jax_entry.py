"""hlocc.jax.jit: a JAX function exported once with symbolic shapes (or lowered per shape without
them) and run by hlocc, against jax.jit on XLA:CPU."""

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="hlocc.jax needs jax (the [jax] extra)")
jnp = jax.numpy

import hlocc.jax  # noqa: E402
from hlocc.errors import ArgumentError  # noqa: E402

RNG = np.random.default_rng(11)


def _model(x, y):
    return {"probs": jax.nn.softmax(x, axis=-1), "rest": (x * 2.0, y.sum())}


def _check(got, want):
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        assert isinstance(g, np.ndarray)
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-5, atol=1e-6)


def test_polymorphic_shapes_export_once_and_run_every_size():
    f = hlocc.jax.jit(_model, polymorphic_shapes=["b, 16", "b"], backend="interpreter")
    for n in (1, 7, 30):
        x, y = RNG.standard_normal((n, 16)).astype(np.float32), RNG.standard_normal(n).astype(np.float32)
        got = f(x, y)
        assert set(got) == {"probs", "rest"} and len(got["rest"]) == 2  # the output pytree
        _check(got, jax.jit(_model)(x, y))
    [(signature, exe)] = f.executables()  # one export and one Executable for the three sizes
    assert signature == ("float32", "float32")
    assert exe.compilations == 0  # the interpreter compiles nothing


def _layernorm(x):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5)


def test_a_layernorm_with_keepdims_is_one_stitched_kernel_over_symbolic_rows():
    """JAX's keepdims writes each row statistic as [?b, 1] (a broadcast of the [?b] reduce, elementwise
    ops, a reshape back): per-row values the stitch fusion keeps at their row."""
    f = hlocc.jax.jit(_layernorm, polymorphic_shapes=["b, 127"])
    for n in (1, 5):
        x = RNG.standard_normal((n, 127)).astype(np.float32)
        np.testing.assert_allclose(f(x), jax.jit(_layernorm)(x), rtol=2e-5, atol=2e-5)
    [(_, exe)] = f.executables()
    assert exe.program.symbolic_kernels == 1 and exe.program.stats.kernels_by_emitter == {"stitch": 1}


def test_polymorphic_shapes_on_the_cpu_backend_build_one_plan():
    f = hlocc.jax.jit(lambda x: jax.nn.softmax(x, axis=-1), polymorphic_shapes=["b, 64"])
    for n in (3, 3, 129):
        x = RNG.standard_normal((n, 64)).astype(np.float32)
        _check(f(x), jax.nn.softmax(x, axis=-1))
    [(_, exe)] = f.executables()
    # One plan, every fusion compiled once for every size (none per size), at b=3 and b=129 alike:
    # the softmax is one stitched kernel over the symbolic rows (rows of 64: cost_model.stitch_min_row).
    program = exe.program
    assert exe.plan_builds == 1 and program.deferred == [] and program.symbolic_kernels == 1
    assert program.stats.kernels_by_emitter == {"stitch": 1}
    assert exe.compilations == program.symbolic_kernels
    assert f"{program.symbolic_kernels} kernel(s) for every size, 0 compiled per size" in exe.stats_text()


def test_without_polymorphic_shapes_it_compiles_per_shape_like_jax_jit():
    f = hlocc.jax.jit(lambda x: jnp.tanh(x) + 1.0)
    for shape in ((4,), (4,), (2, 3)):
        x = RNG.standard_normal(shape).astype(np.float32)
        _check(f(x), jnp.tanh(x) + 1.0)
    assert [sig for sig, _ in f.executables()] == [(((4,), "float32"),), (((2, 3), "float32"),)]


def test_the_repeat_call_takes_only_its_signature():
    """After a call, arguments of exactly its dtypes (and shapes, without polymorphic shapes) go
    straight to its Executable (`_repeat_call`); any other argument takes the general path: a new
    shape compiles (static), a float64 array and a Python scalar are converted as jax.jit would."""
    static, poly = hlocc.jax.jit(lambda x, y: x * y + 1.0), hlocc.jax.jit(lambda x, y: x * y + 1.0,
                                                                          polymorphic_shapes=["b", None])
    y = np.float32(3.0)
    for f in (static, poly):
        for n in (4, 4, 6, 4):
            x = RNG.standard_normal(n).astype(np.float32)
            got = f(x, np.asarray(y))
            assert type(got) is np.ndarray and got.dtype == np.float32
            np.testing.assert_allclose(got, x * y + 1.0, rtol=1e-6)
        assert f._repeat is not None
        x = RNG.standard_normal(4)
        np.testing.assert_allclose(f(x, np.asarray(y)), x.astype(np.float32) * y + 1.0, rtol=1e-6)  # converted
        np.testing.assert_allclose(f(x.astype(np.float32), 3.0), x.astype(np.float32) * y + 1.0, rtol=1e-6)
    assert [sig for sig, _ in static.executables()][:2] == [(((4,), "float32"), ((), "float32")),
                                                           (((6,), "float32"), ((), "float32"))]
    assert len(poly.executables()) == 2  # f32 arrays, then a weak Python float for y
    assert len(static._repeats) == 2 and len(poly._repeats) == 1  # one guard per signature, made once


def test_a_lone_array_and_a_one_element_tuple_come_back_as_returned():
    # a function returning one array skips the pytree rebuild; a 1-tuple keeps its tuple
    lone, one = hlocc.jax.jit(lambda x: x * 2.0, polymorphic_shapes=["b"]), hlocc.jax.jit(lambda x: (x * 2.0,))
    x = RNG.standard_normal(5).astype(np.float32)
    got = lone(x)
    assert type(got) is np.ndarray and got.shape == (5,)
    np.testing.assert_allclose(got, 2 * x)
    got = one(x)
    assert type(got) is tuple and len(got) == 1 and type(got[0]) is np.ndarray
    np.testing.assert_allclose(got[0], 2 * x)


def test_wrong_sizes_and_arity_are_argument_errors():
    f = hlocc.jax.jit(lambda x, y: x + y, polymorphic_shapes=["b", "b"], backend="interpreter")
    with pytest.raises(ArgumentError, match="'b'"):
        f(np.ones(3, np.float32), np.ones(4, np.float32))
    with pytest.raises(ArgumentError, match="2 polymorphic shapes"):
        f(np.ones(3, np.float32))


def test_an_unused_argument_is_passed_and_ignored_as_by_jax_jit():
    """(jax.jit's lowering prunes unused arguments; the call passed them all: an ArgumentError.)"""
    x = np.arange(3, dtype=np.float32)
    assert hlocc.jax.jit(lambda x, key: x * 2, backend="interpreter")(x, np.ones(2, np.uint32)).tolist() == [0, 2, 4]
    empty = hlocc.jax.jit(lambda a, i: a[i], backend="interpreter")(x, np.zeros(0, np.int32))
    assert empty.shape == (0,)


def test_pytree_and_keyword_arguments_are_refused_not_stacked():
    """A list was stacked by np.asarray, promoting an int32 leaf to float32 (jax.jit keeps its type)."""
    f = hlocc.jax.jit(lambda x: x, backend="interpreter")
    for value, kind in (([np.int32(2**30 + 1), np.float32(1)], "list"), ({"p": np.ones(2)}, "dict")):
        with pytest.raises(ArgumentError, match=f"argument 0 is a {kind}: hlocc.jax.jit takes arrays"):
            f(value)
    with pytest.raises(ArgumentError, match="keyword argument 'x': hlocc.jax.jit takes arrays as positional"):
        f(x=np.ones(2))
    # jax.jit's own options are refused when given, not with a TypeError at the first call
    with pytest.raises(ArgumentError, match="unknown option.s. donate_argnums .hlocc.compile takes autotune"):
        hlocc.jax.jit(lambda x: x, donate_argnums=0)


@pytest.mark.parametrize("spec, shape, message", [
    ("b, 3", (2, 4), r"argument 0: expected shape \(b, 3\) .*\[2, 4\] \(float32\): dimension 1 is 4, where the spec fixes 3"),
    ("b, 3", (2,), r"argument 0: .*\[2\] \(float32\): 1 dimensions, not 2"),
])
def test_a_first_call_that_its_polymorphic_shape_rules_out_is_an_argument_error(spec, shape, message):
    # the first call exports: JAX's own parser saw the mismatch ("syntax error in symbolic shape")
    f = hlocc.jax.jit(lambda x: x.sum(), polymorphic_shapes=[spec], backend="interpreter")
    with pytest.raises(ArgumentError, match=message):
        f(np.ones(shape, np.float32))
    assert f(np.ones((2, 3), np.float32)) == 6


def test_a_python_callback_is_refused_naming_it():
    """jax.debug.print is a custom call back into Python: the error says so, not just its target."""
    import jax

    def f(x):
        jax.debug.print("x = {}", x)
        return x * 2

    with pytest.raises(hlocc.UnsupportedError, match=r"calls back into Python \('xla_ffi_python_cpu_callback': "
                                                     r"jax.debug.print"):
        hlocc.jax.jit(f)(np.ones(3, np.float32))
