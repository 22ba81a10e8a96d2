"""Tests of the evaluator's data-movement ops (evaluator/data.py, evaluator/gather_scatter.py):
hand-computed edge cases, and jax.lax on random inputs."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from hlocc.errors import UnsupportedError
from hlocc.evaluator import evaluate, gather_scatter
from hlocc.hlo.parser import parse_hlo

ADD_F32 = """
add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""


def run(body: str, *args, computations: str = ""):
    """Evaluate an entry computation given by its body lines on `args`."""
    text = f"HloModule test\n{computations}\nENTRY main {{\n{body}\n}}\n"
    return evaluate(parse_hlo(text), [np.asarray(a) for a in args])


def assert_same(actual, expected):
    expected = np.asarray(expected)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    np.testing.assert_array_equal(actual, expected)


# -- constants, tuples, shapes -----------------------------------------------------------------

def test_constant_array_and_tuple():
    out = run("""
  a = s32[2,2] constant({{1, 2}, {3, 4}})
  b = f32[] constant(2.5)
  ROOT t = (s32[2,2], f32[]) tuple(a, b)""")
    assert_same(out[0], np.array([[1, 2], [3, 4]], np.int32))
    assert_same(out[1], np.float32(2.5))


def test_get_tuple_element():
    out = run("""
  a = f32[2] parameter(0)
  b = s32[] parameter(1)
  t = (f32[2], s32[]) tuple(a, b)
  ROOT g = s32[] get-tuple-element(t), index=1""", np.zeros(2, np.float32), np.int32(7))
    assert_same(out, np.int32(7))


def test_broadcast_scalar_and_vector():
    assert_same(run("""
  p = f32[] parameter(0)
  ROOT b = f32[2,3] broadcast(p), dimensions={}""", np.float32(4)), np.full((2, 3), 4, np.float32))
    v = np.array([1, 2, 3], np.int32)
    assert_same(run("""
  p = s32[3] parameter(0)
  ROOT b = s32[2,3] broadcast(p), dimensions={1}""", v), np.array([v, v]))
    assert_same(run("""
  p = s32[3] parameter(0)
  ROOT b = s32[3,2] broadcast(p), dimensions={0}""", v), np.array([v, v]).T)


def test_broadcast_rank2_into_middle():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = run("""
  p = f32[2,3] parameter(0)
  ROOT b = f32[2,4,3] broadcast(p), dimensions={0,2}""", x)
    assert_same(out, np.broadcast_to(x[:, None, :], (2, 4, 3)))


def test_reshape_transpose_reverse():
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    assert_same(run("""
  p = s32[2,3,4] parameter(0)
  ROOT r = s32[6,4] reshape(p)""", x), x.reshape(6, 4))
    assert_same(run("""
  p = s32[2,3,4] parameter(0)
  ROOT t = s32[4,2,3] transpose(p), dimensions={2,0,1}""", x), x.transpose(2, 0, 1))
    assert_same(run("""
  p = s32[2,3,4] parameter(0)
  ROOT r = s32[2,3,4] reverse(p), dimensions={0,2}""", x), x[::-1, :, ::-1])


def test_slice_with_strides():
    x = np.arange(30, dtype=np.float32).reshape(5, 6)
    assert_same(run("""
  p = f32[5,6] parameter(0)
  ROOT s = f32[2,2] slice(p), slice={[1:5:2], [0:6:4]}""", x), x[1:5:2, 0:6:4])


def test_concatenate():
    a = np.ones((2, 1), np.float32)
    b = np.arange(4, dtype=np.float32).reshape(2, 2)
    assert_same(run("""
  a = f32[2,1] parameter(0)
  b = f32[2,2] parameter(1)
  ROOT c = f32[2,5] concatenate(a, b, a), dimensions={1}""", a, b), np.concatenate([a, b, a], axis=1))


def test_bitcast_default_layout_is_reshape():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert_same(run("""
  p = f32[2,3] parameter(0)
  ROOT b = f32[3,2] bitcast(p)""", x), x.reshape(3, 2))


def test_bitcast_across_layouts_is_a_transpose():
    # Row-major f32[2,3] memory read as f32[3,2] with dim 0 minor: r[i,j] = memory[j*3+i] = x[j,i].
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert_same(run("""
  p = f32[2,3]{1,0} parameter(0)
  ROOT b = f32[3,2]{0,1} bitcast(p)""", x), x.T)
    # Column-major f32[2,3] memory (x[0,0], x[1,0], x[0,1], ...) read as row-major f32[6].
    assert_same(run("""
  p = f32[2,3]{0,1} parameter(0)
  ROOT b = f32[6]{0} bitcast(p)""", x), x.T.ravel())


def test_bitcast_reinterprets_element_type():
    x = np.array([1.0, -2.0], np.float32)
    assert_same(run("""
  p = f32[2] parameter(0)
  ROOT b = s32[2] bitcast(p)""", x), x.view(np.int32))


def test_iota_types():
    assert_same(run("ROOT i = s32[2,3] iota(), iota_dimension=1"), np.array([[0, 1, 2], [0, 1, 2]], np.int32))
    assert_same(run("ROOT i = f32[3,2] iota(), iota_dimension=0"),
                np.array([[0, 0], [1, 1], [2, 2]], np.float32))
    out = run("ROOT i = bf16[300] iota(), iota_dimension=0")
    assert_same(out, np.arange(300).astype(ml_dtypes.bfloat16))
    assert float(out[257]) == 256.0  # 257 is not representable in bf16: rounds to even


def test_dimension_size_ops():
    x = np.zeros((3, 5), np.float32)
    assert_same(run("""
  p = f32[3,5] parameter(0)
  ROOT g = s32[] get-dimension-size(p), dimensions={1}""", x), np.int32(5))
    out = run("""
  p = f32[3,5] parameter(0)
  n = s32[] constant(2)
  ROOT s = f32[3,<=5] set-dimension-size(p, n), dimensions={1}""", np.ones((3, 5), np.float32))
    assert_same(out, np.ones((3, 5), np.float32))


def test_dynamic_reshape():
    x = np.arange(6, dtype=np.int32)
    out = run("""
  p = s32[6] parameter(0)
  a = s32[] constant(3)
  b = s32[] constant(2)
  ROOT r = s32[<=6,<=6] dynamic-reshape(p, a, b)""", x)
    assert_same(out, x.reshape(3, 2))


# -- dynamic slicing and pad -------------------------------------------------------------------

DYNAMIC_SLICE = """
  p = s32[4,5] parameter(0)
  i = {t}[] parameter(1)
  j = {t}[] parameter(2)
  ROOT d = s32[2,3] dynamic-slice(p, i, j), dynamic_slice_sizes={{2,3}}"""


@pytest.mark.parametrize("start, clamped", [((1, 1), (1, 1)), ((3, 4), (2, 2)), ((-5, 9), (0, 2)), ((2, -1), (2, 0))])
def test_dynamic_slice_clamps_starts(start, clamped):
    x = np.arange(20, dtype=np.int32).reshape(4, 5)
    out = run(DYNAMIC_SLICE.format(t="s64"), x, np.int64(start[0]), np.int64(start[1]))
    i, j = clamped
    assert_same(out, x[i:i + 2, j:j + 3])


def test_dynamic_slice_unsigned_starts():
    x = np.arange(20, dtype=np.int32).reshape(4, 5)
    out = run(DYNAMIC_SLICE.format(t="u8"), x, np.uint8(200), np.uint8(1))
    assert_same(out, x[2:4, 1:4])


def test_dynamic_update_slice_clamps_and_copies():
    x = np.zeros((4, 4), np.float32)
    u = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    out = run("""
  p = f32[4,4] parameter(0)
  u = f32[2,3] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ROOT d = f32[4,4] dynamic-update-slice(p, u, i, j)""", x, u, np.int32(3), np.int32(-2))
    expected = np.zeros((4, 4), np.float32)
    expected[2:4, 0:3] = u
    assert_same(out, expected)
    assert not x.any()  # the operand is not written


def test_pad_negative_and_interior():
    x = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    out = run("""
  p = f32[2,3] parameter(0)
  c = f32[] constant(-1)
  ROOT r = f32[3,4] pad(p, c), padding=1_-1_1x-2_1_1""", x)
    # dim 0: [r0, P, r1] -> lo 1: [P, r0, P, r1] -> hi -1: [P, r0, P]
    # dim 1: [1, P, 2, P, 3] -> lo -2: [2, P, 3] -> hi 1: [2, P, 3, P]
    assert_same(out, np.array([[-1, -1, -1, -1], [2, -1, 3, -1], [-1, -1, -1, -1]], np.float32))


@pytest.mark.parametrize("seed", range(3))
def test_pad_matches_jax(seed):
    lax = pytest.importorskip("jax.lax")
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    config = [(int(rng.integers(-2, 3)), int(rng.integers(-2, 3)), int(rng.integers(0, 3))) for _ in range(2)]
    expected = np.asarray(lax.pad(x, np.float32(9), config))
    padding = "x".join(f"{lo}_{hi}_{interior}" for lo, hi, interior in config)
    out = run(f"""
  p = f32[3,4] parameter(0)
  c = f32[] constant(9)
  ROOT r = f32[{expected.shape[0]},{expected.shape[1]}] pad(p, c), padding={padding}""", x)
    assert_same(out, expected)


def test_pad_crops_to_empty_and_handles_empty_operand():
    x = np.arange(3, dtype=np.int32)
    assert run("""
  p = s32[3] parameter(0)
  c = s32[] constant(0)
  ROOT r = s32[0] pad(p, c), padding=-2_-1""", x).shape == (0,)
    assert_same(run("""
  p = s32[0] parameter(0)
  c = s32[] constant(7)
  ROOT r = s32[3] pad(p, c), padding=1_2_5""", np.zeros(0, np.int32)), np.full(3, 7, np.int32))


# -- gather ------------------------------------------------------------------------------------

def test_gather_rows_with_clamping():
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    idx = np.array([[2], [0], [9], [-4]], np.int32)
    out = run("""
  p = f32[4,3] parameter(0)
  i = s32[4,1] parameter(1)
  ROOT g = f32[4,3] gather(p, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0},
    index_vector_dim=1, slice_sizes={1,3}""", x, idx)
    assert_same(out, x[[2, 0, 3, 0]])


def test_gather_implicit_index_vector_dim_and_window_clamp():
    x = np.arange(10, dtype=np.int32)
    idx = np.array([[0, 7], [9, 3]], np.int32)  # index_vector_dim == rank: each index a 1-vector
    out = run("""
  p = s32[10] parameter(0)
  i = s32[2,2] parameter(1)
  ROOT g = s32[2,2,4] gather(p, i), offset_dims={2}, collapsed_slice_dims={}, start_index_map={0},
    index_vector_dim=2, slice_sizes={4}""", x, idx)
    starts = np.minimum(idx, 6)  # a window of 4 must fit in 10
    assert_same(out, (starts[..., None] + np.arange(4)).astype(np.int32))


def test_gather_index_vector_dim_in_the_middle_and_offset_first():
    x = np.arange(20, dtype=np.int32).reshape(4, 5)
    idx = np.array([[[1, 2], [0, 0], [3, 4]]], np.int32).transpose(0, 2, 1)  # s32[1,2,3], vector dim 1
    out = run("""
  p = s32[4,5] parameter(0)
  i = s32[1,2,3] parameter(1)
  ROOT g = s32[2,1,3] gather(p, i), offset_dims={0}, collapsed_slice_dims={1}, start_index_map={1,0},
    index_vector_dim=1, slice_sizes={2,1}""", x, idx)
    # index vector k = (col, row) because start_index_map={1,0}; window = 2 rows from `row`
    expected = np.empty((2, 1, 3), np.int32)
    for k, (col, row) in enumerate([(1, 2), (0, 0), (3, 4)]):
        row = min(row, 2)
        expected[:, 0, k] = x[row:row + 2, col]
    assert_same(out, expected)


def test_gather_with_batching_dims():
    # Per batch b (operand dim 0 <-> indices dim 0): out[b, k] = x[b, idx[b, k]].
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    idx = np.array([[0, 3], [1, 1], [2, 0]], np.int32)
    out = run("""
  p = f32[3,4] parameter(0)
  i = s32[3,2] parameter(1)
  ROOT g = f32[3,2] gather(p, i), offset_dims={}, collapsed_slice_dims={1}, start_index_map={1},
    operand_batching_dims={0}, start_indices_batching_dims={0}, index_vector_dim=2, slice_sizes={1,1}""", x, idx)
    assert_same(out, np.take_along_axis(x, idx, axis=1))


def gather_text(operand, indices, dnums, slice_sizes, out_shape, ivd):
    def dims(v):
        return "{" + ",".join(map(str, v)) + "}"
    return f"""
  p = f32[{",".join(map(str, operand.shape))}] parameter(0)
  i = s32[{",".join(map(str, indices.shape))}] parameter(1)
  ROOT g = f32[{",".join(map(str, out_shape))}] gather(p, i), offset_dims={dims(dnums.offset_dims)},
    collapsed_slice_dims={dims(dnums.collapsed_slice_dims)}, start_index_map={dims(dnums.start_index_map)},
    operand_batching_dims={dims(dnums.operand_batching_dims)},
    start_indices_batching_dims={dims(dnums.start_indices_batching_dims)},
    index_vector_dim={ivd}, slice_sizes={dims(slice_sizes)}"""


@pytest.mark.parametrize("seed", range(4))
def test_gather_matches_jax(seed):
    lax = pytest.importorskip("jax.lax")
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((3, 5, 6)).astype(np.float32)
    cases = [
        (lax.GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(0,), start_index_map=(0, 2)),
         (1, 3, 2), (7, 2)),
        (lax.GatherDimensionNumbers(offset_dims=(2,), collapsed_slice_dims=(2,), start_index_map=(2, 1),
                                    operand_batching_dims=(0,), start_indices_batching_dims=(1,)),
         (1, 4, 1), (2, 3, 2)),
        (lax.GatherDimensionNumbers(offset_dims=(0, 1, 2), collapsed_slice_dims=(), start_index_map=(1,)),
         (2, 2, 3), (1,)),
    ]
    for dnums, slice_sizes, idx_shape in cases:
        idx = rng.integers(-2, 7, size=idx_shape).astype(np.int32)
        expected = np.asarray(lax.gather(x, idx, dnums, slice_sizes, mode=lax.GatherScatterMode.CLIP))
        out = run(gather_text(x, idx, dnums, slice_sizes, expected.shape, idx.ndim - 1), x, idx)
        assert_same(out, expected)


# -- scatter -----------------------------------------------------------------------------------

SCATTER_ROWS = """
  p = f32[4,2] parameter(0)
  i = s32[{n}] parameter(1)
  u = f32[{n},2] parameter(2)
  ROOT s = f32[4,2] scatter(p, i, u), update_window_dims={{1}}, inserted_window_dims={{0}},
    scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply={comb}"""


def test_scatter_add_combines_repeated_indices_and_skips_out_of_bounds():
    x = np.ones((4, 2), np.float32)
    idx = np.array([1, 3, 1, 4, -1], np.int32)
    u = np.arange(10, dtype=np.float32).reshape(5, 2)
    out = run(SCATTER_ROWS.format(n=5, comb="add_f32"), x, idx, u, computations=ADD_F32)
    expected = x.copy()
    expected[1] += u[0] + u[2]
    expected[3] += u[1]
    assert_same(out, expected)


def test_scatter_window_partly_out_of_bounds_is_skipped_whole():
    x = np.zeros(6, np.int32)
    idx = np.array([[0], [4], [2]], np.int32)  # window of 3 at 4 overhangs: skipped entirely
    u = np.array([[1, 2, 3], [10, 20, 30], [100, 200, 300]], np.int32)
    out = run("""
  p = s32[6] parameter(0)
  i = s32[3,1] parameter(1)
  u = s32[3,3] parameter(2)
  ROOT s = s32[6] scatter(p, i, u), update_window_dims={1}, inserted_window_dims={},
    scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add""", x, idx, u, computations="""
add {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT s = s32[] add(a, b)
}""")
    assert_same(out, np.array([1, 2, 103, 200, 300, 0], np.int32))


def test_scatter_replace_keeps_last_update():
    x = np.zeros((4, 2), np.float32)
    idx = np.array([2, 0, 2], np.int32)
    u = np.arange(6, dtype=np.float32).reshape(3, 2)
    out = run(SCATTER_ROWS.format(n=3, comb="assign"), x, idx, u, computations="""
assign {
  a = f32[] parameter(0)
  ROOT b = f32[] parameter(1)
}""")
    expected = x.copy()
    expected[0] = u[1]
    expected[2] = u[2]
    assert_same(out, expected)


def test_scatter_with_batching_dims():
    # operand dim 0 <-> indices dim 0: out[b, idx[b, k]] += u[b, k].
    x = np.zeros((2, 4), np.float32)
    idx = np.array([[0, 0, 3], [2, 1, 5]], np.int32)
    u = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    out = run("""
  p = f32[2,4] parameter(0)
  i = s32[2,3] parameter(1)
  u = f32[2,3] parameter(2)
  ROOT s = f32[2,4] scatter(p, i, u), update_window_dims={}, inserted_window_dims={1},
    input_batching_dims={0}, scatter_indices_batching_dims={0},
    scatter_dims_to_operand_dims={1}, index_vector_dim=2, to_apply=add_f32""", x, idx, u, computations=ADD_F32)
    assert_same(out, np.array([[3, 0, 0, 3], [0, 5, 4, 0]], np.float32))


def test_scatter_does_not_write_operand():
    x = np.zeros((4, 2), np.float32)
    run(SCATTER_ROWS.format(n=1, comb="add_f32"), x, np.array([0], np.int32), np.ones((1, 2), np.float32),
        computations=ADD_F32)
    assert not x.any()


def _scatter_instr(text: str):
    return parse_hlo(text).entry.root


ORDERED_SCATTER = """HloModule t
combine {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT c = s32[] subtract(a, b)
}
ENTRY main {
  p = s32[4] parameter(0)
  i = s32[5,1] parameter(1)
  u = s32[5] parameter(2)
  ROOT s = s32[4] scatter(p, i, u), update_window_dims={}, inserted_window_dims={0},
    scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=combine
}"""


def test_scatter_general_combiner_applies_updates_in_order():
    # The combiner is evaluated through `call` on whole arrays; old*10+update makes order visible.
    calls = []

    def call(comp, args):
        calls.append(len(args[0]))
        return args[0] * 10 + args[1]

    idx = np.array([[2], [0], [2], [2], [0]], np.int32)
    u = np.array([1, 2, 3, 4, 5], np.int32)
    (out,) = gather_scatter.scatter(_scatter_instr(ORDERED_SCATTER), [np.zeros(4, np.int32)], idx, [u], call)
    assert_same(out, np.array([25, 0, 134, 0], np.int32))
    assert calls == [2, 2, 1]  # three rounds: no element repeats within one


def test_scatter_non_commutative_combiner_through_evaluator():
    # subtract(old, update) per update in order: element 2 gets 100-1-3-4, element 0 gets 100-2-5.
    idx = np.array([[2], [0], [2], [2], [0]], np.int32)
    u = np.array([1, 2, 3, 4, 5], np.int32)
    out = evaluate(parse_hlo(ORDERED_SCATTER), [np.full(4, 100, np.int32), idx, u])
    assert_same(out, np.array([93, 100, 92, 100], np.int32))


def test_variadic_scatter_general_combiner():
    text = """HloModule t
combine {
  a0 = s32[] parameter(0)
  a1 = f32[] parameter(1)
  b0 = s32[] parameter(2)
  b1 = f32[] parameter(3)
  ROOT t = (s32[], f32[]) tuple(b0, a1)
}
ENTRY main {
  p0 = s32[3] parameter(0)
  p1 = f32[3] parameter(1)
  i = s32[3] parameter(2)
  u0 = s32[3] parameter(3)
  u1 = f32[3] parameter(4)
  ROOT s = (s32[3], f32[3]) scatter(p0, p1, i, u0, u1), update_window_dims={}, inserted_window_dims={0},
    scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=combine
}"""

    def call(comp, args):
        old0, old1, new0, new1 = args
        return (old0 - new0, old1 + new1)

    instr = _scatter_instr(text)
    idx = np.array([1, 1, 7], np.int32)
    out = gather_scatter.scatter(instr, [np.zeros(3, np.int32), np.ones(3, np.float32)], idx,
                                 [np.array([1, 2, 3], np.int32), np.array([.5, .25, 9], np.float32)], call)
    assert_same(out[0], np.array([0, -3, 0], np.int32))
    assert_same(out[1], np.array([1, 1.75, 1], np.float32))
    # Through the evaluator: the tuple combiner picks (update0, old1) per element.
    result = evaluate(parse_hlo(text), [np.zeros(3, np.int32), np.ones(3, np.float32), idx,
                                        np.array([1, 2, 3], np.int32), np.array([.5, .25, 9], np.float32)])
    assert isinstance(result, tuple)
    assert_same(result[0], np.array([0, 2, 0], np.int32))
    assert_same(result[1], np.ones(3, np.float32))


def test_variadic_scatter_replace():
    text = """HloModule t
assign {
  a0 = s32[] parameter(0)
  a1 = s32[] parameter(1)
  b0 = s32[] parameter(2)
  b1 = s32[] parameter(3)
  ROOT t = (s32[], s32[]) tuple(b0, b1)
}
ENTRY main {
  p0 = s32[3] parameter(0)
  p1 = s32[3] parameter(1)
  i = s32[3] parameter(2)
  u0 = s32[3] parameter(3)
  u1 = s32[3] parameter(4)
  ROOT s = (s32[3], s32[3]) scatter(p0, p1, i, u0, u1), update_window_dims={}, inserted_window_dims={0},
    scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=assign
}"""
    z = np.zeros(3, np.int32)
    out = evaluate(parse_hlo(text), [z, z, np.array([2, 0, 2], np.int32), np.array([1, 2, 3], np.int32),
                                     np.array([4, 5, 6], np.int32)])
    assert_same(out[0], np.array([2, 0, 3], np.int32))
    assert_same(out[1], np.array([5, 0, 6], np.int32))


def test_scatter_bf16_add_rounds_after_every_update():
    # 300 updates of 1.0 into one bf16 element: sequential bf16 adds stall at 256 (256 + 1 rounds to 256).
    out = run("""
  p = bf16[2] parameter(0)
  i = s32[300,1] parameter(1)
  u = bf16[300] parameter(2)
  ROOT s = bf16[2] scatter(p, i, u), update_window_dims={}, inserted_window_dims={0},
    scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add_bf16""",
              np.zeros(2, ml_dtypes.bfloat16), np.zeros((300, 1), np.int32), np.ones(300, ml_dtypes.bfloat16),
              computations="""
add_bf16 {
  a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT s = bf16[] add(a, b)
}""")
    assert_same(out, np.array([256, 0], ml_dtypes.bfloat16))


def test_scatter_performance_is_vectorized():
    rng = np.random.default_rng(0)
    n = 1 << 18
    x = np.zeros(1000, np.float32)
    idx = rng.integers(0, 1000, size=(n, 1)).astype(np.int32)
    u = rng.standard_normal(n).astype(np.float32)
    out = run("""
  p = f32[1000] parameter(0)
  i = s32[262144,1] parameter(1)
  u = f32[262144] parameter(2)
  ROOT s = f32[1000] scatter(p, i, u), update_window_dims={}, inserted_window_dims={0},
    scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add_f32""", x, idx, u, computations=ADD_F32)
    np.testing.assert_allclose(out, np.bincount(idx[:, 0], weights=u, minlength=1000), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("seed", range(4))
def test_scatter_add_matches_jax(seed):
    lax = pytest.importorskip("jax.lax")
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((5, 4, 3)).astype(np.float32)
    dnums = lax.ScatterDimensionNumbers(update_window_dims=(1, 2), inserted_window_dims=(1,),
                                        scatter_dims_to_operand_dims=(1, 0))
    idx = rng.integers(-1, 5, size=(6, 2)).astype(np.int32)
    u = rng.standard_normal((6, 2, 3)).astype(np.float32)
    expected = np.asarray(lax.scatter_add(x, idx, u, dnums, mode=lax.GatherScatterMode.FILL_OR_DROP))
    out = run("""
  p = f32[5,4,3] parameter(0)
  i = s32[6,2] parameter(1)
  u = f32[6,2,3] parameter(2)
  ROOT s = f32[5,4,3] scatter(p, i, u), update_window_dims={1,2}, inserted_window_dims={1},
    scatter_dims_to_operand_dims={1,0}, index_vector_dim=1, to_apply=add_f32""", x, idx, u, computations=ADD_F32)
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("seed", range(3))
def test_dynamic_slice_and_update_match_jax(seed):
    lax = pytest.importorskip("jax.lax")
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((5, 6, 4)).astype(np.float32)
    # jax wraps negative starts before XLA clamps them, so only non-negative ones are comparable here
    starts = [np.int32(s) for s in rng.integers(0, 8, size=3)]
    expected = np.asarray(lax.dynamic_slice(x, starts, (2, 4, 4)))
    out = run("""
  p = f32[5,6,4] parameter(0)
  a = s32[] parameter(1)
  b = s32[] parameter(2)
  c = s32[] parameter(3)
  ROOT d = f32[2,4,4] dynamic-slice(p, a, b, c), dynamic_slice_sizes={2,4,4}""", x, *starts)
    assert_same(out, expected)
    update = rng.standard_normal((3, 2, 4)).astype(np.float32)
    expected = np.asarray(lax.dynamic_update_slice(x, update, starts))
    out = run("""
  p = f32[5,6,4] parameter(0)
  u = f32[3,2,4] parameter(1)
  a = s32[] parameter(2)
  b = s32[] parameter(3)
  c = s32[] parameter(4)
  ROOT d = f32[5,6,4] dynamic-update-slice(p, u, a, b, c)""", x, update, *starts)
    assert_same(out, expected)


@pytest.mark.parametrize("combiner, lax_name", [("maximum", "scatter_max"), ("multiply", "scatter_mul"),
                                                ("minimum", "scatter_min")])
def test_scatter_combiners_match_jax(combiner, lax_name):
    lax = pytest.importorskip("jax.lax")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 3)).astype(np.float32)
    idx = rng.integers(0, 7, size=(10, 1)).astype(np.int32)
    u = rng.standard_normal((10, 3)).astype(np.float32)
    dnums = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                        scatter_dims_to_operand_dims=(0,))
    expected = np.asarray(getattr(lax, lax_name)(x, idx, u, dnums, mode=lax.GatherScatterMode.FILL_OR_DROP))
    out = run("""
  p = f32[6,3] parameter(0)
  i = s32[10,1] parameter(1)
  u = f32[10,3] parameter(2)
  ROOT s = f32[6,3] scatter(p, i, u), update_window_dims={1}, inserted_window_dims={0},
    scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=comb""", x, idx, u, computations=f"""
comb {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] {combiner}(b, a)
}}""")
    np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_gather_and_scatter_with_no_indices():
    x = np.arange(4, dtype=np.float32)
    out = run("""
  p = f32[4] parameter(0)
  i = s32[0,1] parameter(1)
  ROOT g = f32[0,2] gather(p, i), offset_dims={1}, collapsed_slice_dims={}, start_index_map={0},
    index_vector_dim=1, slice_sizes={2}""", x, np.zeros((0, 1), np.int32))
    assert out.shape == (0, 2)
    out = run("""
  p = f32[4] parameter(0)
  i = s32[0,1] parameter(1)
  u = f32[0] parameter(2)
  ROOT s = f32[4] scatter(p, i, u), update_window_dims={}, inserted_window_dims={0},
    scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add_f32""",
              x, np.zeros((0, 1), np.int32), np.zeros(0, np.float32), computations=ADD_F32)
    assert_same(out, x)


def test_unsigned_indices_past_int64_are_out_of_bounds():
    x = np.zeros(4, np.int32)
    big = np.array([[2**64 - 1], [1]], np.uint64)
    out = run("""
  p = s32[4] parameter(0)
  i = u64[2,1] parameter(1)
  u = s32[2] parameter(2)
  ROOT s = s32[4] scatter(p, i, u), update_window_dims={}, inserted_window_dims={0},
    scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add""", x, big, np.array([5, 6], np.int32),
              computations="""
add {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT s = s32[] add(a, b)
}""")
    assert_same(out, np.array([0, 6, 0, 0], np.int32))
    out = run("""
  p = s32[4] parameter(0)
  i = u64[2,1] parameter(1)
  ROOT g = s32[2] gather(p, i), offset_dims={}, collapsed_slice_dims={0}, start_index_map={0},
    index_vector_dim=1, slice_sizes={1}""", np.arange(4, dtype=np.int32), big)
    assert_same(out, np.array([3, 1], np.int32))  # the huge start clamps to the last element


# -- unsupported -------------------------------------------------------------------------------

def test_bitcast_between_sub_byte_types_is_unsupported():
    with pytest.raises(UnsupportedError, match="sub-byte"):
        run("""
  p = s4[4] parameter(0)
  ROOT b = u4[4] bitcast(p)""", np.zeros(4, ml_dtypes.int4))
