"""The thunk runtime's buffers on whole programs, against the interpreter: input_output_alias,
outputs that are parameters, constants or repeated, tuple parameters, non-default layouts,
in-place dynamic-update-slice, ops that must not overwrite the operand they read, size-0 and rank-0
arrays, narrow types."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from _thunk_helpers import (  # noqa: F401  (poisoned_memory: an autouse fixture)
    BOTH_PIPELINES,
    POISON,
    assert_close,
    assert_exact,
    check_exact,
    host_opcodes,
    leaves,
    poisoned_memory,
    random_array,
    run_both,
    thunk_kinds,
)

from hlocc.runtime.buffer_assignment import AllocationKind

# -- buffers ---------------------------------------------------------------------------------------

ALIASED_UPDATE = """HloModule donated, input_output_alias={ {}: (0, {}, may-alias) }
ENTRY e {
  cache = f32[8,4] parameter(0)
  row = f32[1,4] parameter(1)
  i = s32[] parameter(2)
  zero = s32[] constant(0)
  ROOT d = f32[8,4] dynamic-update-slice(cache, row, i, zero)
}"""


def kv_inputs(i: int):
    cache = np.arange(32, dtype=np.float32).reshape(8, 4)
    return cache, np.full((1, 4), -1.5, np.float32), np.int32(i)


@BOTH_PIPELINES
@pytest.mark.parametrize("i", [0, 5, 7, 100, -3])
def test_input_output_alias_leaves_the_callers_array_alone(i, hlo_passes):
    cache, row, index = kv_inputs(i)
    exe, got = check_exact(ALIASED_UPDATE, cache, row, index, hlo_passes=hlo_passes)
    np.testing.assert_array_equal(cache, np.arange(32, dtype=np.float32).reshape(8, 4))
    assert not np.shares_memory(got, cache)
    expected = cache.copy()
    expected[min(max(i, 0), 7)] = -1.5  # start indices are clamped into the operand
    np.testing.assert_array_equal(got, expected)
    # The update is in place in the (copied) parameter's allocation: the output is that allocation.
    output = exe.runner.assignment.output_slices[0].allocation_index
    assert exe.runner.assignment.allocations[output].kind is AllocationKind.PARAMETER
    assert exe.runner.stats.copies == 0


DONATED = {
    # The output is the donated parameter's buffer, but reverse and transpose cannot run in place.
    "reverse": ("{ {}: (0, {}, may-alias) }", "p = s32[8] parameter(0)\n  ROOT r = s32[8] reverse(p), dimensions={0}"),
    "transpose": ("{ {}: (0, {}, may-alias) }",
                  "p = s32[8] parameter(0)\n  r = s32[2,4] reshape(p)\n  t = s32[4,2] transpose(r), dimensions={1,0}\n"
                  "  ROOT f = s32[8] reshape(t)"),
    # Two donated parameters swapped: each output is the other's buffer.
    "swap": ("{ {0}: (0, {}, may-alias), {1}: (1, {}, may-alias) }",
             "p = s32[8] parameter(0)\n  q = s32[8] parameter(1)\n  ROOT t = (s32[8], s32[8]) tuple(q, p)"),
    # A leaf of a tuple parameter donated to an output that also needs the other leaf.
    "tuple_leaf": ("{ {1}: (0, {1}, may-alias) }",
                   "p = (s32[8], s32[8]) parameter(0)\n  a = s32[8] get-tuple-element(p), index=0\n"
                   "  b = s32[8] get-tuple-element(p), index=1\n  s = s32[8] add(a, b)\n"
                   "  ROOT t = (s32[8], s32[8]) tuple(b, s)"),
}


@BOTH_PIPELINES
@pytest.mark.parametrize("name", DONATED)
def test_donated_parameters(name, hlo_passes):
    aliases, body = DONATED[name]
    text = f"HloModule donated, input_output_alias={aliases}\nENTRY e {{\n  {body}\n}}"
    x, y = np.arange(8, dtype=np.int32), np.arange(10, 18, dtype=np.int32)
    args = ((x, y),) if name == "tuple_leaf" else (x, y) if name == "swap" else (x,)
    _, got = check_exact(text, *args, hlo_passes=hlo_passes)
    np.testing.assert_array_equal(x, np.arange(8))
    np.testing.assert_array_equal(y, np.arange(10, 18))
    for leaf in leaves(got):
        assert not np.shares_memory(leaf, x) and not np.shares_memory(leaf, y)


KV_CACHE = """HloModule kv
ENTRY e {
  cache = f32[8,4] parameter(0)
  row = f32[1,4] parameter(1)
  i = s32[] parameter(2)
  zero = s32[] constant(0)
  scaled = f32[8,4] negate(cache)
  d = f32[8,4] dynamic-update-slice(scaled, row, i, zero)
  ROOT e = f32[8,4] add(d, d)
}"""


@BOTH_PIPELINES
@pytest.mark.parametrize("i", [0, 3, 7, 9, -1])
def test_dynamic_update_slice_in_place_on_a_dying_operand(i, hlo_passes):
    cache, row, index = kv_inputs(i)
    exe, got = check_exact(KV_CACHE, cache, row, index, hlo_passes=hlo_passes)
    expected = -cache
    expected[min(max(i, 0), 7)] = -1.5
    np.testing.assert_array_equal(got, 2 * expected)
    assert exe.runner.stats.copies == 0, exe.runner.to_string()
    assert not exe.runner.stats.host_ops


KV_CACHE_IN_LOOP = """HloModule kv_loop
cond {
  s = (s32[], f32[6,4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(6)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[6,4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  cache = f32[6,4] get-tuple-element(s), index=1
  f = f32[] convert(i)
  row = f32[1,4] broadcast(f), dimensions={}
  zero = s32[] constant(0)
  d = f32[6,4] dynamic-update-slice(cache, row, i, zero)
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT t = (s32[], f32[6,4]) tuple(i2, d)
}
ENTRY e {
  cache = f32[6,4] parameter(0)
  zero = s32[] constant(0)
  t = (s32[], f32[6,4]) tuple(zero, cache)
  w = (s32[], f32[6,4]) while(t), condition=cond, body=body
  ROOT r = f32[6,4] get-tuple-element(w), index=1
}"""


@pytest.mark.parametrize("donated", [False, True])
def test_dynamic_update_slice_in_place_in_a_loop(donated):
    text = KV_CACHE_IN_LOOP
    if donated:
        text = text.replace("HloModule kv_loop", "HloModule kv_loop, input_output_alias={ {}: (0, {}, may-alias) }")
    cache = np.full((6, 4), 9.0, np.float32)
    exe, got = check_exact(text, cache)
    np.testing.assert_array_equal(got, np.repeat(np.arange(6, dtype=np.float32)[:, None], 4, axis=1))
    np.testing.assert_array_equal(cache, 9.0)
    # The cache is copied into the loop state at most once, before the loop (not at all when it is
    # donated: the loop updates the parameter's buffer), and updated in place by every iteration.
    cache_copies = [t for t in exe.runner.program.walk() if t.kind == "copy" and t.source.size == 96]
    assert len(cache_copies) == (0 if donated else 1), exe.runner.to_string()
    assert cache_copies == [t for t in exe.runner.program.thunks if t in cache_copies]


OUTPUT_IS_PARAMETER = """HloModule passthrough
ENTRY e {
  p = f32[5] parameter(0)
  q = s32[2,3] parameter(1)
  n = f32[5] negate(p)
  ROOT t = (f32[5], s32[2,3], f32[5]) tuple(p, q, n)
}"""


@BOTH_PIPELINES
def test_output_that_is_a_parameter(hlo_passes):
    p = np.array([1, -2, 3.5, 0, -0.0], np.float32)
    q = np.arange(6, dtype=np.int32).reshape(2, 3)
    exe, (rp, rq, rn) = check_exact(OUTPUT_IS_PARAMETER, p, q, hlo_passes=hlo_passes)
    assert not np.shares_memory(rp, p) and not np.shares_memory(rq, q)
    rp[:] = 7
    rq[:] = 7
    np.testing.assert_array_equal(p, [1, -2, 3.5, 0, -0.0])
    np.testing.assert_array_equal(q, np.arange(6).reshape(2, 3))


def test_root_that_is_a_parameter():
    text = "HloModule p\nENTRY e {\n  ROOT p = s32[2,2]{0,1} parameter(0)\n}"
    x = np.array([[1, 2], [3, 4]], np.int32)
    _, got = check_exact(text, x)
    assert not np.shares_memory(got, x)


OUTPUT_IS_CONSTANT = """HloModule constant_out
ENTRY e {
  p = s32[3] parameter(0)
  c = s32[3] constant({10, 20, 30})
  f = f32[] constant(2.5)
  s = s32[3] add(p, c)
  ROOT t = (s32[3], s32[3], f32[]) tuple(c, s, f)
}"""


@BOTH_PIPELINES
def test_output_that_is_a_constant(hlo_passes):
    x = np.array([1, 2, 3], np.int32)
    exe, (c, s, f) = check_exact(OUTPUT_IS_CONSTANT, x, hlo_passes=hlo_passes)
    np.testing.assert_array_equal(c, [10, 20, 30])
    np.testing.assert_array_equal(s, [11, 22, 33])
    assert float(f) == 2.5
    # Whatever the caller does with the result must not change the executable's constant.
    if c.flags.writeable:
        c[:] = -1
    c2, s2, _ = exe(x)
    np.testing.assert_array_equal(c2, [10, 20, 30])
    np.testing.assert_array_equal(s2, [11, 22, 33])
    assert not np.shares_memory(c, c2)


def test_root_that_is_a_constant():
    text = "HloModule c\nENTRY e {\n  ROOT c = bf16[2,2]{0,1} constant({{1, 2}, {3, 4}})\n}"
    _, got = check_exact(text)
    np.testing.assert_array_equal(got.astype(np.float32), [[1, 2], [3, 4]])


REPEATED_OUTPUT = """HloModule repeated
ENTRY e {
  p = f32[4] parameter(0)
  n = f32[4] negate(p)
  ROOT t = (f32[4], f32[4], f32[4], f32[4]) tuple(n, n, p, p)
}"""


@BOTH_PIPELINES
def test_repeated_output(hlo_passes):
    p = np.array([1, 2, 3, 4], np.float32)
    _, got = check_exact(REPEATED_OUTPUT, p, hlo_passes=hlo_passes)
    np.testing.assert_array_equal(got[0], -p)
    np.testing.assert_array_equal(got[2], p)
    # Each output leaf is an array of its own (XLA copies a buffer that appears twice in the result).
    for a in range(4):
        for b in range(a + 1, 4):
            assert not np.shares_memory(got[a], got[b]), (a, b)


TUPLE_PARAMETER = """HloModule tuple_param
ENTRY e {
  p = (f32[3], (s32[2], pred[2])) parameter(0)
  x = f32[3] get-tuple-element(p), index=0
  inner = (s32[2], pred[2]) get-tuple-element(p), index=1
  y = s32[2] get-tuple-element(inner), index=0
  z = pred[2] get-tuple-element(inner), index=1
  nx = f32[3] negate(x)
  ny = s32[2] select(z, y, y)
  ROOT t = (f32[3], s32[2], (s32[2], pred[2])) tuple(nx, ny, inner)
}"""


@BOTH_PIPELINES
def test_tuple_shaped_parameter(hlo_passes):
    arg = (np.array([1, 2, -3], np.float32), (np.array([5, 6], np.int32), np.array([True, False])))
    _, (nx, ny, (y, z)) = check_exact(TUPLE_PARAMETER, arg, hlo_passes=hlo_passes)
    np.testing.assert_array_equal(nx, [-1, -2, 3])
    np.testing.assert_array_equal(y, [5, 6])
    assert z.dtype == np.bool_ and list(z) == [True, False]


LAYOUTS = """HloModule layouts
ENTRY e {
  p = f32[3,4]{0,1} parameter(0)
  q = s32[2,3,4]{1,2,0} parameter(1)
  t = f32[4,3]{1,0} transpose(p), dimensions={1,0}
  n = f32[3,4]{0,1} negate(p)
  c = s32[2,3,4]{0,1,2} copy(q)
  r = s32[4,3,2]{2,0,1} transpose(q), dimensions={2,1,0}
  ROOT out = (f32[4,3]{1,0}, f32[3,4]{0,1}, s32[2,3,4]{0,1,2}, s32[4,3,2]{2,0,1}, f32[3,4]{0,1}) tuple(t, n, c, r, p)
}"""


@BOTH_PIPELINES
def test_non_default_layouts_on_parameters_and_results(hlo_passes):
    p = np.arange(12, dtype=np.float32).reshape(3, 4)
    q = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    _, (t, n, c, r, pp) = check_exact(LAYOUTS, p, q, hlo_passes=hlo_passes)
    np.testing.assert_array_equal(t, p.T)
    np.testing.assert_array_equal(n, -p)
    np.testing.assert_array_equal(c, q)
    np.testing.assert_array_equal(r, q.transpose(2, 1, 0))
    np.testing.assert_array_equal(pp, p)


def test_non_default_layout_bitcast_reshape():
    # A reshape between layouts whose physical orders agree is a bitcast (no thunk): the bytes of
    # f32[3,4]{0,1} are those of f32[4,3]{1,0}.
    text = """HloModule bitcast
ENTRY e {
  p = f32[3,4]{0,1} parameter(0)
  n = f32[3,4]{0,1} negate(p)
  ROOT r = f32[12]{0} reshape(n)
}"""
    p = np.arange(12, dtype=np.float32).reshape(3, 4)
    _, got = check_exact(text, p, hlo_passes=False)
    np.testing.assert_array_equal(got, -p.reshape(12))


SIZE_ZERO = """HloModule empty
ENTRY e {
  p = f32[0,4] parameter(0)
  q = f32[3,4] parameter(1)
  n = f32[0,4] negate(p)
  c = f32[3,4] concatenate(p, q), dimensions={0}
  e = s32[0] constant({})
  ROOT t = (f32[0,4], f32[3,4], s32[0], f32[0,4]) tuple(n, c, e, p)
}"""


@pytest.mark.parametrize("hlo_passes", [True, False], ids=["passes", "no_passes"])
def test_size_zero_arrays(hlo_passes):
    p = np.zeros((0, 4), np.float32)
    q = np.arange(12, dtype=np.float32).reshape(3, 4)
    _, (n, c, e, pp) = check_exact(SIZE_ZERO, p, q, hlo_passes=hlo_passes)
    assert n.shape == (0, 4) and e.shape == (0,) and pp.shape == (0, 4)
    np.testing.assert_array_equal(c, q)


EMPTY_AND_NONEMPTY_OUTPUTS = """HloModule empty_first
fused {
  p = f32[0] parameter(0)
  q = f32[4] parameter(1)
  n = f32[0] negate(p)
  m = f32[4] negate(q)
  ROOT t = (OUTPUTS) tuple(ORDER)
}
ENTRY e {
  p = f32[0] parameter(0)
  q = f32[4] parameter(1)
  ROOT f = (OUTPUTS) fusion(p, q), kind=kLoop, calls=fused
}"""


@pytest.mark.parametrize("empty_first", [True, False], ids=["empty_first", "empty_last"])
def test_multi_output_fusion_with_an_empty_output(empty_first):
    order, outputs = ("n, m", "f32[0], f32[4]") if empty_first else ("m, n", "f32[4], f32[0]")
    text = EMPTY_AND_NONEMPTY_OUTPUTS.replace("OUTPUTS", outputs).replace("ORDER", order)
    q = np.array([1, -2, 3, -4], np.float32)
    _, got = check_exact(text, np.zeros(0, np.float32), q, hlo_passes=False)
    np.testing.assert_array_equal(got[1 if empty_first else 0], -q)


SCALARS = """HloModule scalars
ENTRY e {
  x = f32[] parameter(0)
  n = s32[] parameter(1)
  b = pred[] parameter(2)
  y = f32[] multiply(x, x)
  c = f32[] convert(n)
  s = f32[] add(y, c)
  nb = pred[] not(b)
  v = f32[3] broadcast(s), dimensions={}
  ROOT t = (f32[], pred[], f32[3], s32[]) tuple(s, nb, v, n)
}"""


@BOTH_PIPELINES
def test_scalar_parameters_and_results(hlo_passes):
    _, (s, nb, v, n) = check_exact(SCALARS, np.float32(1.5), np.int32(-4), np.bool_(True), hlo_passes=hlo_passes)
    assert s.shape == () and float(s) == 1.5 * 1.5 - 4 and not nb and int(n) == -4
    np.testing.assert_array_equal(v, np.full(3, s))


def test_scalar_root():
    text = "HloModule s\nENTRY e {\n  x = s32[] parameter(0)\n  ROOT y = s32[] negate(x)\n}"
    _, got = check_exact(text, np.int32(5))
    assert got.shape == () and int(got) == -5


NARROW_TYPES = """HloModule narrow
ENTRY e {
  p = pred[9] parameter(0)
  q = pred[9] parameter(1)
  a = s4[9] parameter(2)
  b = u4[9] parameter(3)
  h = bf16[9] parameter(4)
  f = f8e4m3fn[9] parameter(5)
  g = f8e5m2[9] parameter(6)
  x = pred[9] xor(p, q)
  s = s4[9] add(a, a)
  u = u4[9] multiply(b, b)
  hh = bf16[9] add(h, h)
  fc = f32[9] convert(f)
  gh = bf16[9] convert(g)
  hf = f8e4m3fn[9] convert(h)
  ROOT t = (pred[9], s4[9], u4[9], bf16[9], f32[9], bf16[9], f8e4m3fn[9], pred[9], s4[9]) tuple(x, s, u, hh, fc, gh, hf, p, a)
}"""


@BOTH_PIPELINES
def test_pred_sub_byte_and_narrow_float_arrays(hlo_passes):
    rng = np.random.default_rng(21)
    dtypes = [np.bool_, np.bool_, ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn,
              ml_dtypes.float8_e5m2]
    args = [random_array((9,), d, rng) for d in dtypes]
    _, got = check_exact(NARROW_TYPES, *args, hlo_passes=hlo_passes)
    np.testing.assert_array_equal(got[0], args[0] ^ args[1])
    np.testing.assert_array_equal(got[1].astype(np.int32), ((args[2].astype(np.int32) * 2 + 8) % 16) - 8)
    np.testing.assert_array_equal(got[2].astype(np.int32), args[3].astype(np.int32) ** 2 % 16)


# Ops that read their operand at other positions than they write: the operand (a kernel's result
# that dies there) must not share their output buffer. A dot next to them keeps the entry from being
# one fusion, so without the HLO passes each op is a kernel of its own.
OTHER_POSITION_READERS = {
    "reverse": "s32[8] reverse(x), dimensions={0}",
    "strided_slice": "s32[8] slice(x2), slice={[0:16:2]}",
    "concatenate": "s32[8] concatenate(xh, xh), dimensions={0}",
    "pad": "s32[8] pad(xh, z), padding=2_2",
    "dynamic_slice": "s32[8] dynamic-slice(x2, i), dynamic_slice_sizes={8}",
    "dynamic_update_slice": "s32[8] dynamic-update-slice(x, xh2, i)",
    "gather": ("s32[8] gather(x, gi), offset_dims={}, collapsed_slice_dims={0}, start_index_map={0}, "
               "index_vector_dim=1, slice_sizes={1}"),
    "reduce_window": "s32[8] reduce-window(x, z), window={size=3 pad=1_1}, to_apply=add",
    "select_of_reversed": "s32[8] select(pr, x, xr)",
    "sort": "s32[8] sort(x), dimensions={0}, to_apply=greater",
}
READER_MODULE = """HloModule readers
add {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT c = s32[] add(a, b)
}
greater {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GT
}
ENTRY e {
  p = s32[8] parameter(0)
  i = s32[] parameter(1)
  z = s32[] constant(0)
  x = s32[8] negate(p)
  xr = s32[8] reverse(x), dimensions={0}
  pr = pred[8] compare(p, z), direction=GT
  gi = s32[8,1] constant({{7},{6},{5},{4},{3},{2},{1},{0}})
  x2 = s32[16] concatenate(x, p), dimensions={0}
  xh = s32[4] slice(x), slice={[2:6]}
  xh2 = s32[4] slice(x), slice={[1:5]}
  y = OP
  r = s32[8] add(y, y)
  d = s32[] dot(p, p), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  ROOT t = (s32[8], s32[]) tuple(r, d)
}"""


@BOTH_PIPELINES
@pytest.mark.parametrize("name", OTHER_POSITION_READERS)
def test_ops_reading_a_dying_operand_at_other_positions(name, hlo_passes):
    text = READER_MODULE.replace("OP", OTHER_POSITION_READERS[name]).replace("pr = pred[8] compare(p, z)",
                                                                                "pr = pred[8] compare(p, zb)")
    text = text.replace("  x = s32[8] negate(p)", "  zb = s32[8] broadcast(z), dimensions={}\n  x = s32[8] negate(p)")
    exe, _ = check_exact(text, np.arange(8, dtype=np.int32) * 3 - 7, np.int32(3), hlo_passes=hlo_passes)
    if not hlo_passes:
        assert exe.runner.stats.kernels + len(exe.runner.stats.host_ops) >= 8
