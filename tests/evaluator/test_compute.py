"""reduce, reduce-window, select-and-scatter, map and scan in the reference evaluator."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from _compute_helpers import COMBINERS, assert_same_bits, run, run_jax

from hlocc.errors import UnsupportedError
from hlocc.evaluator import Evaluator


def reduce_module(in_type: str, dims: str, out_type: str, combiner: str, init: str, scalar: str = "f32") -> str:
    return COMBINERS + f"""
ENTRY e {{
  p = {in_type} parameter(0)
  z = {scalar}[] constant({init})
  ROOT r = {out_type} reduce(p, z), dimensions={{{dims}}}, to_apply={combiner}
}}"""


# -- reduce: fast path ------------------------------------------------------------------------

def test_reduce_rows_with_init_folded_once():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = run(reduce_module("f32[3,4]", "1", "f32[3]", "add_f32", "10"), x)
    assert_same_bits(out, np.array([16, 32, 48], np.float32))


def test_reduce_all_dims_to_scalar():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    out = run(reduce_module("f32[2,3,4]", "0,1,2", "f32[]", "add_f32", "0"), x)
    assert_same_bits(out, np.float32(276))


def test_reduce_bf16_accumulates_in_f32():
    # Summing 300 ones in bf16 would stall at 256 (256 + 1 rounds back to 256); f32 gives 300.
    text = """
add_bf16 { a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT r = bf16[] add(a, b) }
ENTRY e {
  p = bf16[300] parameter(0)
  z = bf16[] constant(0)
  ROOT r = bf16[] reduce(p, z), dimensions={0}, to_apply=add_bf16
}"""
    out = run(text, np.ones(300, ml_dtypes.bfloat16))
    assert out.dtype == ml_dtypes.bfloat16 and float(out) == 300.0


def test_reduce_max_propagates_nan():
    x = np.array([[1, np.nan, 3], [4, 5, -np.inf]], np.float32)
    out = run(reduce_module("f32[2,3]", "1", "f32[2]", "max_f32", "-inf"), x)
    assert np.isnan(out[0]) and out[1] == 5


def test_reduce_int_wraps():
    x = np.array([2**31 - 1, 1, 5], np.int32)
    out = run(reduce_module("s32[3]", "0", "s32[]", "add_s32", "0", scalar="s32"), x)
    assert_same_bits(out, np.int32(-(2**31) + 5))


def test_reduce_empty_dimension_gives_init():
    x = np.zeros((0, 3), np.float32)
    out = run(reduce_module("f32[0,3]", "0", "f32[3]", "add_f32", "5"), x)
    assert_same_bits(out, np.full(3, 5, np.float32))


# -- reduce: general path ---------------------------------------------------------------------

SLOW_ADD_S32 = """
slow_add { a = s32[] parameter(0)
  b = s32[] parameter(1)
  s = s32[] add(a, b)
  ROOT r = s32[] copy(s) }
"""


@pytest.mark.parametrize("shape,dims", [((7,), (0,)), ((5, 6, 3), (0, 2)), ((4, 9), (1,)), ((2, 1), (1,))])
def test_reduce_general_path_matches_numpy(shape, dims):
    rng = np.random.default_rng(1)
    x = rng.integers(-1000, 1000, size=shape).astype(np.int32)
    kept = [d for i, d in enumerate(shape) if i not in dims]
    text = SLOW_ADD_S32 + f"""
ENTRY e {{
  p = s32[{','.join(map(str, shape))}] parameter(0)
  z = s32[] constant(7)
  ROOT r = s32[{','.join(map(str, kept))}] reduce(p, z), dimensions={{{','.join(map(str, dims))}}}, to_apply=slow_add
}}"""
    assert_same_bits(run(text, x), (x.sum(axis=dims) + 7).astype(np.int32))


def test_reduce_general_path_keeps_element_order():
    # Subtraction is not associative: the tree must pair neighbours in order, so that
    # a non-commutative but associative combiner like "keep the last non-zero" works.
    text = """
last_nonzero { a = s32[] parameter(0)
  b = s32[] parameter(1)
  z = s32[] constant(0)
  nz = pred[] compare(b, z), direction=NE
  ROOT r = s32[] select(nz, b, a) }
ENTRY e {
  p = s32[2,7] parameter(0)
  z = s32[] constant(-1)
  ROOT r = s32[2] reduce(p, z), dimensions={1}, to_apply=last_nonzero
}"""
    x = np.array([[3, 0, 4, 0, 0, 9, 0], [0, 0, 0, 0, 0, 0, 0]], np.int32)
    assert_same_bits(run(text, x), np.array([9, -1], np.int32))


ARGMAX = """
argmax {
  v0 = f32[] parameter(0)
  i0 = s32[] parameter(1)
  v1 = f32[] parameter(2)
  i1 = s32[] parameter(3)
  gt = pred[] compare(v0, v1), direction=GT
  eq = pred[] compare(v0, v1), direction=EQ
  lt = pred[] compare(i0, i1), direction=LT
  tie = pred[] and(eq, lt)
  first = pred[] or(gt, tie)
  v = f32[] select(first, v0, v1)
  i = s32[] select(first, i0, i1)
  ROOT t = (f32[], s32[]) tuple(v, i)
}
"""


def test_variadic_reduce_argmax():
    rng = np.random.default_rng(2)
    x = rng.integers(0, 5, size=(6, 11)).astype(np.float32)  # many ties: lowest index must win
    idx = np.broadcast_to(np.arange(11, dtype=np.int32), x.shape).copy()
    text = ARGMAX + """
ENTRY e {
  p = f32[6,11] parameter(0)
  q = s32[6,11] parameter(1)
  a = f32[] constant(-inf)
  b = s32[] constant(0)
  ROOT r = (f32[6], s32[6]) reduce(p, q, a, b), dimensions={1}, to_apply=argmax
}"""
    values, indices = run(text, x, idx)
    assert_same_bits(values, x.max(axis=1))
    assert_same_bits(indices, x.argmax(axis=1).astype(np.int32))


def test_reduce_matches_jax_sum_and_max():
    jnp = pytest.importorskip("jax.numpy")
    x = np.random.default_rng(3).standard_normal((5, 6, 7)).astype(np.float32)
    ours, theirs = run_jax(lambda a: (jnp.sum(a, axis=(0, 2)), jnp.max(a, axis=1)), x)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-5, atol=1e-5)
    assert_same_bits(ours[1], theirs[1])



# A kept dimension of size 0 (n = 0) gives empty results of the kept shape; n = 2 is the same
# module on data, checked against numpy/JAX. Merging the reduced axes into one of length -1
# failed on n = 0 (numpy cannot infer it when the array is empty).

@pytest.mark.parametrize("n", [2, 0])
def test_variadic_reduce_with_an_empty_kept_dimension(n):
    text = f"""
add2 {{
  a = f32[] parameter(0)
  b = s32[] parameter(1)
  c = f32[] parameter(2)
  d = s32[] parameter(3)
  s = f32[] add(a, c)
  t = s32[] add(b, d)
  ROOT r = (f32[], s32[]) tuple(s, t)
}}
ENTRY e {{
  x = f32[{n},4] parameter(0)
  y = s32[{n},4] parameter(1)
  z = f32[] constant(0)
  w = s32[] constant(0)
  ROOT r = (f32[{n}], s32[{n}]) reduce(x, y, z, w), dimensions={{1}}, to_apply=add2
}}"""
    x = np.arange(4 * n, dtype=np.float32).reshape(n, 4)
    y = np.arange(4 * n, dtype=np.int32).reshape(n, 4)
    sums, totals = run(text, x, y)
    assert_same_bits(sums, x.sum(axis=1))
    assert_same_bits(totals, y.sum(axis=1, dtype=np.int32))


def run_stablehlo(fn, *args):
    """Like `run_jax`, through JAX's StableHLO and hlocc's importer on the interpreter backend:
    JAX's HLO text replaces an empty reduction by an empty constant, StableHLO keeps it."""
    import jax

    import hlocc

    module = hlocc.import_stablehlo(jax.jit(fn).lower(*args).as_text())
    return hlocc.compile(module, backend="interpreter")(*args), np.asarray(jax.jit(fn)(*args))


@pytest.mark.parametrize("n", [2, 0])
def test_argmax_with_an_empty_kept_dimension_matches_jax(n):
    jnp = pytest.importorskip("jax.numpy")
    x = np.random.default_rng(6).standard_normal((n, 4, 3)).astype(np.float32)
    ours, theirs = run_stablehlo(lambda a: jnp.argmax(a, axis=2), x)
    assert_same_bits(ours, theirs)

# -- reduce-window ----------------------------------------------------------------------------

def test_reduce_window_skips_padding_and_holes():
    # XLA folds the init value once and skips padding/base-dilation positions (checked against
    # jax.lax.reduce_window on CPU: [11, 13, 15, 13] and [11, 12, 12, 13]).
    def module(window):
        return COMBINERS + f"""
ENTRY e {{
  p = f32[3] parameter(0)
  z = f32[] constant(10)
  ROOT w = f32[4] reduce-window(p, z), window={{{window}}}, to_apply=add_f32
}}"""
    x = np.array([1, 2, 3], np.float32)
    assert_same_bits(run(module("size=2 pad=1_1"), x), np.array([11, 13, 15, 13], np.float32))
    assert_same_bits(run(module("size=2 lhs_dilate=2"), x), np.array([11, 12, 12, 13], np.float32))


@pytest.mark.parametrize("params", [
    dict(window=(2, 3), strides=(1, 1), padding=((0, 0), (0, 0))),
    dict(window=(3, 2), strides=(2, 1), padding=((1, 2), (0, 1))),
    dict(window=(2, 2), strides=(1, 2), padding=((1, 0), (2, 2)), base_dilation=(2, 1)),
    dict(window=(2, 3), strides=(1, 1), padding=((0, 1), (1, 1)), window_dilation=(2, 2)),
    dict(window=(3, 3), strides=(3, 2), padding=((-1, 1), (0, 0)), base_dilation=(1, 3), window_dilation=(1, 2)),
])
@pytest.mark.parametrize("op", ["add", "max", "custom"])
def test_reduce_window_matches_jax(params, op):
    jax = pytest.importorskip("jax")
    from jax import lax

    x = np.random.default_rng(4).standard_normal((6, 7)).astype(np.float32)
    computation, init = {
        "add": (lax.add, np.float32(0)),
        "max": (lax.max, np.float32(-np.inf)),
        # not a single recognised op: exercises the general (masked tree) path
        "custom": (lambda a, b: lax.max(a, b) + 0.0 * lax.min(a, b), np.float32(-np.inf)),
    }[op]

    def fn(a):
        return lax.reduce_window(a, init, computation, params["window"], params["strides"], params["padding"],
                                 base_dilation=params.get("base_dilation"),
                                 window_dilation=params.get("window_dilation"))

    ours, theirs = run_jax(fn, x)
    del jax
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


def test_variadic_reduce_window_argmax():
    text = ARGMAX + """
ENTRY e {
  p = f32[6] parameter(0)
  q = s32[6] parameter(1)
  a = f32[] constant(-inf)
  b = s32[] constant(-1)
  ROOT r = (f32[4], s32[4]) reduce-window(p, q, a, b), window={size=3 stride=2 pad=1_2}, to_apply=argmax
}"""
    x = np.array([3, 1, 4, 4, 5, 9], np.float32)
    values, indices = run(text, x, np.arange(6, dtype=np.int32))
    # windows: [pad,3,1] [1,4,4] [4,5,9] [9,pad,pad]
    assert_same_bits(values, np.array([3, 4, 9, 9], np.float32))
    assert_same_bits(indices, np.array([0, 2, 5, 5], np.int32))



@pytest.mark.parametrize("n", [2, 0])
def test_variadic_reduce_window_with_an_empty_kept_dimension(n):
    text = ARGMAX + f"""
ENTRY e {{
  p = f32[{n},4] parameter(0)
  q = s32[{n},4] parameter(1)
  a = f32[] constant(-inf)
  b = s32[] constant(-1)
  ROOT r = (f32[{n},2], s32[{n},2]) reduce-window(p, q, a, b), window={{size=1x2 stride=1x2}}, to_apply=argmax
}}"""
    x = np.array([[3, 1, 4, 4], [5, 9, 2, 6]], np.float32)[:n]
    index = np.broadcast_to(np.arange(4, dtype=np.int32), x.shape)
    values, indices = run(text, x, index)
    pairs = x.reshape(n, 2, 2)
    assert_same_bits(values, pairs.max(axis=2))
    assert_same_bits(indices, (pairs.argmax(axis=2) + np.array([0, 2])).astype(np.int32))

def test_cumulative_reduce_window_of_a_million_elements():
    """JAX's cumsum/cummax on the CPU is a reduce-window as long as the axis; evaluated as a window
    per element it needed n^2 memory (4 TiB for 2^20 elements: the interpreter failed on it). The
    scans run as prefix reductions, forward and reverse, with a fast and a general combiner."""
    n, m = 1 << 20, 4099
    text = COMBINERS + ARGMAX + f"""
ENTRY e {{
  p = s32[{n}] parameter(0)
  f = f32[2,{n}] parameter(1)
  g = f32[3,{m}] parameter(2)
  i = s32[3,{m}] parameter(3)
  z = s32[] constant(0)
  lo = f32[] constant(-inf)
  b = s32[] constant(-1)
  s = s32[{n}] reduce-window(p, z), window={{size={n} pad={n - 1}_0}}, to_apply=add_s32
  r = f32[2,{n}] reduce-window(f, lo), window={{size=1x{n} pad=0_0x0_{n - 1}}}, to_apply=max_f32
  a = (f32[3,{m}], s32[3,{m}]) reduce-window(g, i, lo, b), window={{size=1x{m} pad=0_0x{m - 1}_0}}, to_apply=argmax
  v = f32[3,{m}] get-tuple-element(a), index=0
  w = s32[3,{m}] get-tuple-element(a), index=1
  ROOT t = (s32[{n}], f32[2,{n}], f32[3,{m}], s32[3,{m}]) tuple(s, r, v, w)
}}"""
    rng = np.random.default_rng(5)
    p = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    f = rng.standard_normal((2, n)).astype(np.float32)
    g = rng.standard_normal((3, m)).astype(np.float32)
    index = np.broadcast_to(np.arange(m, dtype=np.int32), (3, m))
    s, r, v, w = run(text, p, f, g, index)
    assert_same_bits(s, np.cumsum(p, dtype=np.int32))
    assert_same_bits(r, np.flip(np.maximum.accumulate(np.flip(f, 1), axis=1), 1))
    assert_same_bits(v, np.maximum.accumulate(g, axis=1))
    # the running argmax: the last place the running maximum changed (g's values are distinct)
    assert_same_bits(w, np.maximum.accumulate(np.where(g == v, index, -1), axis=1))


# -- select-and-scatter -----------------------------------------------------------------------

def select_and_scatter_module(direction: str, n: int, window: str, m: int) -> str:
    return COMBINERS + f"""
select {{ a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = pred[] compare(a, b), direction={direction} }}
ENTRY e {{
  p = f32[{n}] parameter(0)
  s = f32[{m}] parameter(1)
  z = f32[] constant(0)
  ROOT r = f32[{n}] select-and-scatter(p, s, z), window={{{window}}}, select=select, scatter=add_f32
}}"""


def test_select_and_scatter_sums_overlapping_picks():
    x = np.array([1, 5, 3, 5, 2], np.float32)
    src = np.array([1, 2, 3, 4], np.float32)
    out = run(select_and_scatter_module("GE", 5, "size=2", 4), x, src)
    assert_same_bits(out, np.array([0, 3, 0, 7, 0], np.float32))


def test_select_and_scatter_ties_follow_iteration_order():
    x = np.array([5, 5], np.float32)
    src = np.array([1], np.float32)
    # GE keeps the current (first) pick on a tie, GT moves to the later element.
    assert_same_bits(run(select_and_scatter_module("GE", 2, "size=2", 1), x, src), np.array([1, 0], np.float32))
    assert_same_bits(run(select_and_scatter_module("GT", 2, "size=2", 1), x, src), np.array([0, 1], np.float32))


def test_select_and_scatter_never_picks_padding():
    x = np.array([-3, -4], np.float32)
    src = np.array([1, 2, 3], np.float32)
    # windows [pad,-3] [-3,-4] [-4,pad]: padding is never selected even though x < 0
    out = run(select_and_scatter_module("GE", 2, "size=2 pad=1_1", 3), x, src)
    assert_same_bits(out, np.array([3, 3], np.float32))


def test_select_and_scatter_matches_jax():
    pytest.importorskip("jax")
    from jax import lax
    from jax._src.lax.windowed_reductions import _select_and_scatter_add

    rng = np.random.default_rng(5)
    operand = rng.integers(0, 4, size=(5, 6)).astype(np.float32)  # ties on purpose
    window, strides, padding = (2, 3), (1, 2), ((1, 0), (1, 1))
    out_shape = lax.reduce_window(operand, -np.inf, lax.max, window, strides, padding).shape
    source = rng.standard_normal(out_shape).astype(np.float32)

    ours, theirs = run_jax(lambda s, o: _select_and_scatter_add(s, o, lax.ge_p, window, strides, padding),
                           source, operand)
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-6)



@pytest.mark.parametrize("n", [2, 0])
def test_select_and_scatter_with_an_empty_dimension_matches_jax(n):
    """The max-pool gradient of an operand with a dimension of size 0 is empty."""
    pytest.importorskip("jax")
    from jax import lax
    from jax._src.lax.windowed_reductions import _select_and_scatter_add

    operand = np.random.default_rng(7).standard_normal((n, 4)).astype(np.float32)
    source = np.arange(2 * n, dtype=np.float32).reshape(n, 2)
    ours, theirs = run_stablehlo(
        lambda s, o: _select_and_scatter_add(s, o, lax.ge_p, (1, 2), (1, 2), ((0, 0), (0, 0))), source, operand)
    assert_same_bits(ours, theirs)

# -- map, scan --------------------------------------------------------------------------------

def test_map_applies_computation_elementwise():
    text = """
fma { a = f32[] parameter(0)
  b = f32[] parameter(1)
  two = f32[] constant(2)
  t = f32[] multiply(a, two)
  ROOT r = f32[] add(t, b) }
ENTRY e {
  p = f32[2,3] parameter(0)
  q = f32[2,3] parameter(1)
  ROOT m = f32[2,3] map(p, q), dimensions={0,1}, to_apply=fma
}"""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.full((2, 3), 0.5, np.float32)
    assert_same_bits(run(text, x, y), 2 * x + y)


def test_scan_is_unsupported_with_a_clear_message():
    from hlocc.hlo.ir import HloInstruction
    from hlocc.hlo.types import Shape

    instr = HloInstruction("my_scan", "scan", Shape.array("f32", [3]))
    with pytest.raises(UnsupportedError, match=r"^unsupported: scan is not implemented.*'my_scan'"):
        Evaluator().evaluate_instruction(instr, [])


@pytest.mark.parametrize(("dst", "values", "want"), [
    ("f8e4m3fn", [1.0625000001, 17.0000000017, 0.53125000005, -1.0625000001], [1.125, 18.0, 0.5625, -1.125]),
    ("f4e2m1fn", [2.50000000025, 3.49999999965], [3.0, 3.0]),
])
def test_f64_to_narrow_floats_rounds_once(dst, values, want):
    """XLA converts f64 to f8/f4 directly: a value just above an f8 midpoint rounds up. Through f32
    with round-to-nearest (ml_dtypes' own f64 cast does that) it met the midpoint first and rounded to
    even, down; through f32 rounded to odd it is right, in the evaluator and in the kernels."""
    import hlocc

    text = (f"HloModule m\nENTRY e {{\n  a = f64[{len(values)}] parameter(0)\n  c = {dst}[{len(values)}] convert(a)\n"
            f"  ROOT r = f64[{len(values)}] convert(c)\n}}\n")
    for backend in ("interpreter", "cpu"):
        np.testing.assert_array_equal(hlocc.compile(text, backend)(np.array(values)), np.array(want), err_msg=backend)


@pytest.mark.parametrize("dtype, np_dtype", [("f8e5m2", ml_dtypes.float8_e5m2), ("f8e4m3fn", ml_dtypes.float8_e4m3fn),
                                             ("bf16", ml_dtypes.bfloat16)])
def test_reduce_window_of_narrow_floats(dtype, np_dtype):
    """The window view strides raw elements: numpy's stride tricks rebuild a dtype from its typestr,
    which float8_e5m2's ('<f1') does not survive."""
    text = f"""HloModule m
add {{ a = {dtype}[] parameter(0)  b = {dtype}[] parameter(1)  ROOT s = {dtype}[] add(a, b) }}
ENTRY e {{
  p = {dtype}[4] parameter(0)
  z = {dtype}[] constant(0)
  ROOT r = {dtype}[3] reduce-window(p, z), window={{size=2}}, to_apply=add
}}"""
    x = np.arange(4).astype(np_dtype)
    np.testing.assert_array_equal(run(text, x).astype(np.float32), [1, 3, 5])
