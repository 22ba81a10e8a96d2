"""Per-op output->input maps against the reference evaluator.

Each data parameter element holds its own bit, 1 << (base + linear index), in u64, so every
output element of an op that moves, reduces (with `or`/`add`) or contracts (dot with ones) data
holds exactly the set of source elements it read. For every output element, the map's points
with those dims (over symbols, and runtime variables fixed to the values the op used) must yield
exactly that set, constraints included (pad, concatenate, reduce-window padding)."""

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings

from hlocc.analysis.affine_expr import dim, rt, sym
from hlocc.analysis.op_indexing import output_to_input, scatter_update_to_operand
from hlocc.evaluator import evaluate
from hlocc.hlo.parser import parse_hlo

OR = "or_c {\n a = u64[] parameter(0)\n b = u64[] parameter(1)\n ROOT o = u64[] or(a, b)\n}\n"


def shape_text(dims):
    return "u64[" + ",".join(map(str, dims)) + "]"


def run_and_check(body: str, data: dict[int, list[int]], others: dict[int, np.ndarray] | None = None,
                  runtime=lambda index: ()):
    """body: the entry computation; data: parameter number -> dims of u64 bit-holding params;
    others: parameter number -> value; runtime(out_index) -> runtime variable values."""
    module = parse_hlo(OR + "ENTRY e {\n" + body + "\n}\n")
    root = module.entry.root
    others = others or {}
    args, bases, base = [], {}, 0
    for p in module.entry.parameters:
        k = p.parameter_number
        if k in data:
            n = int(np.prod(data[k]))
            assert base + n <= 64, "test too large for one bit per element"
            args.append((np.uint64(1) << np.arange(base, base + n, dtype=np.uint64)).reshape(data[k]))
            bases[k], base = base, base + n
        else:
            args.append(others[k])
    out = np.asarray(evaluate(module, args))
    maps = output_to_input(root)
    per_operand = {}
    for k in data:
        m = maps[k]
        pts = m.points()
        per_operand[k] = (m, pts, m.apply(pts))
    for index in np.ndindex(*out.shape):
        got = 0
        for k, (m, pts, res) in per_operand.items():
            nd, nr = len(m.dims), len(m.runtime)
            rows = np.all(pts[:, :nd] == np.array(index, dtype=np.int64), axis=1)
            if nr:
                rows &= np.all(pts[:, pts.shape[1] - nr:] == np.array(runtime(index), dtype=np.int64), axis=1)
            for r in res[rows]:
                got |= 1 << (bases[k] + int(np.ravel_multi_index(tuple(r), data[k])))
        assert got == int(out[index]), f"output {index}: map gives {got:b}, op read {int(out[index]):b}"
    return maps


dims_st = st.lists(st.integers(1, 4), min_size=1, max_size=3)


@settings(max_examples=25, deadline=None)
@given(dims=dims_st, data=st.data())
def test_transpose(dims, data):
    perm = data.draw(st.permutations(range(len(dims))))
    out = [dims[p] for p in perm]
    run_and_check(f"p = {shape_text(dims)} parameter(0)\nROOT t = {shape_text(out)} transpose(p), "
                  f"dimensions={{{','.join(map(str, perm))}}}", {0: dims})


@settings(max_examples=25, deadline=None)
@given(dims=dims_st, data=st.data())
def test_reverse_and_slice(dims, data):
    flip = data.draw(st.lists(st.sampled_from(range(len(dims))), unique=True))
    run_and_check(f"p = {shape_text(dims)} parameter(0)\nROOT r = {shape_text(dims)} reverse(p), "
                  f"dimensions={{{','.join(map(str, flip))}}}", {0: dims})
    spec = []
    for n in dims:
        start = data.draw(st.integers(0, n - 1))
        limit = data.draw(st.integers(start + 1, n))
        spec.append((start, limit, data.draw(st.integers(1, 3))))
    out = [-(-(limit - start) // stride) for start, limit, stride in spec]
    text = ",".join(f"[{a}:{b}:{c}]" for a, b, c in spec)
    run_and_check(f"p = {shape_text(dims)} parameter(0)\nROOT s = {shape_text(out)} slice(p), slice={{{text}}}",
                  {0: dims})


@settings(max_examples=25, deadline=None)
@given(dims=dims_st, extra=st.lists(st.integers(1, 3), max_size=2), data=st.data())
def test_broadcast(dims, extra, data):
    out = dims + extra
    order = data.draw(st.permutations(range(len(out))))
    out = [out[i] for i in order]
    mapping = [order.index(i) for i in range(len(dims))]
    run_and_check(f"p = {shape_text(dims)} parameter(0)\nROOT b = {shape_text(out)} broadcast(p), "
                  f"dimensions={{{','.join(map(str, mapping))}}}", {0: dims})


@pytest.mark.parametrize("src, dst", [
    ([4, 8], [32]), ([32], [4, 8]), ([4, 8], [2, 4, 4]), ([4, 6, 2], [8, 3, 2]), ([6], [1, 6, 1]), ([2, 3, 5], [30]),
])
def test_reshape(src, dst):
    if np.prod(src) > 64:
        pytest.skip("too large")
    run_and_check(f"p = {shape_text(src)} parameter(0)\nROOT r = {shape_text(dst)} reshape(p)", {0: src})


def test_bitcast_with_layouts():
    run_and_check("p = u64[4,6]{0,1} parameter(0)\nROOT b = u64[6,4]{1,0} bitcast(p)", {0: [4, 6]})
    run_and_check("p = u64[4,6]{1,0} parameter(0)\nROOT b = u64[2,12]{1,0} bitcast(p)", {0: [4, 6]})


@settings(max_examples=25, deadline=None)
@given(dims=st.lists(st.integers(1, 4), min_size=1, max_size=2),
       pads=st.lists(st.tuples(st.integers(-2, 2), st.integers(-2, 2), st.integers(0, 2)), min_size=2, max_size=2))
def test_pad_constraints_select_exactly_the_operand(dims, pads):
    pads = pads[:len(dims)]
    out = [lo + hi + n + (n - 1) * i for n, (lo, hi, i) in zip(dims, pads)]
    if min(out) < 1:
        return
    config = "x".join(f"{lo}_{hi}_{i}" for lo, hi, i in pads)
    run_and_check(f"p = {shape_text(dims)} parameter(0)\nz = u64[] constant(0)\n"
                  f"ROOT q = {shape_text(out)} pad(p, z), padding={config}", {0: dims})


def test_pad_map_matches_xla_docs():
    maps = run_and_check("p = u64[4,4] parameter(0)\nz = u64[] constant(0)\n"
                         "ROOT q = u64[12,16] pad(p, z), padding=1_4_1x4_8_0", {0: [4, 4]})
    assert str(maps[0]) == ("(d0, d1) -> ((d0 + 1) floordiv 2 - 1, d1 - 4), domain: d0 in [1, 7], d1 in [4, 7],"
                            " (d0 + 1) mod 2 in [0, 0]")
    assert str(maps[1]) == "(d0, d1) -> (), domain: d0 in [0, 11], d1 in [0, 15]"


def test_concatenate_constraints_select_each_operand():
    maps = run_and_check("a = u64[2,3] parameter(0)\nb = u64[2,1] parameter(1)\nc = u64[2,4] parameter(2)\n"
                         "ROOT k = u64[2,8] concatenate(a, b, c), dimensions={1}",
                         {0: [2, 3], 1: [2, 1], 2: [2, 4]})
    assert str(maps[1]) == "(d0, d1) -> (d0, 0), domain: d0 in [0, 1], d1 in [3, 3]"
    assert str(maps[2]) == "(d0, d1) -> (d0, d1 - 4), domain: d0 in [0, 1], d1 in [4, 7]"


@settings(max_examples=20, deadline=None)
@given(dims=st.lists(st.integers(1, 4), min_size=1, max_size=3), data=st.data())
def test_reduce(dims, data):
    reduced = sorted(data.draw(st.lists(st.sampled_from(range(len(dims))), unique=True, min_size=1)))
    out = [n for i, n in enumerate(dims) if i not in reduced]
    maps = run_and_check(f"p = {shape_text(dims)} parameter(0)\nz = u64[] constant(0)\n"
                         f"ROOT r = {shape_text(out)} reduce(p, z), dimensions={{{','.join(map(str, reduced))}}},"
                         " to_apply=or_c", {0: dims})
    assert len(maps[0].symbols) == sum(1 for i in reduced if dims[i] > 1)




def reduce_window_shape(dims, sizes, strides, pads, lhs, rhs):
    out = []
    for n, w, s, (lo, hi), ld, rd in zip(dims, sizes, strides, pads, lhs, rhs):
        padded = (n - 1) * ld + 1 + lo + hi
        out.append((padded - ((w - 1) * rd + 1)) // s + 1)
    return out


@pytest.mark.parametrize("dims, sizes, strides, pads, lhs, rhs", [
    ([6], [3], [2], [(0, 0)], [1], [1]),
    ([5, 4], [2, 3], [1, 1], [(1, 0), (1, 1)], [1, 1], [1, 1]),
    ([4], [2], [1], [(1, 1)], [2], [1]),
    ([7], [3], [1], [(0, 0)], [1], [2]),
    ([3, 3], [2, 2], [2, 1], [(0, 1), (1, 0)], [1, 2], [1, 1]),
])
def test_reduce_window_against_evaluator(dims, sizes, strides, pads, lhs, rhs):
    out = reduce_window_shape(dims, sizes, strides, pads, lhs, rhs)
    x = "x".join
    window = (f"size={x(map(str, sizes))} stride={x(map(str, strides))} "
              f"pad={x(f'{a}_{b}' for a, b in pads)} lhs_dilate={x(map(str, lhs))} rhs_dilate={x(map(str, rhs))}")
    run_and_check(f"p = {shape_text(dims)} parameter(0)\nz = u64[] constant(0)\n"
                  f"ROOT r = {shape_text(out)} reduce-window(p, z), window={{{window}}}, to_apply=or_c", {0: dims})


def test_dot_with_ones_reads_exactly_the_contraction():
    ones = np.ones((2, 3, 2), np.uint64)
    maps = run_and_check("a = u64[2,4,3] parameter(0)\nb = u64[2,3,2] parameter(1)\n"
                         "ROOT d = u64[2,4,2] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0},"
                         " lhs_contracting_dims={2}, rhs_contracting_dims={1}", {0: [2, 4, 3]}, {1: ones})
    assert str(maps[0]) == "(d0, d1, d2)[s0] -> (d0, d1, s0), domain: d0 in [0, 1], d1 in [0, 3], d2 in [0, 1], s0 in [0, 2]"
    assert str(maps[1]) == "(d0, d1, d2)[s0] -> (d0, s0, d2), domain: d0 in [0, 1], d1 in [0, 3], d2 in [0, 1], s0 in [0, 2]"
    run_and_check("a = u64[3,2] parameter(0)\nb = u64[2,4] parameter(1)\n"
                  "ROOT d = u64[3,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
                  {1: [2, 4]}, {0: np.ones((3, 2), np.uint64)})


@pytest.mark.parametrize("offsets", [(0, 0), (1, 2), (5, -3), (2, 9)])
def test_dynamic_slice_runtime_offsets_are_clamped(offsets):
    clamped = (min(max(offsets[0], 0), 4 - 2), min(max(offsets[1], 0), 6 - 3))
    maps = run_and_check("p = u64[4,6] parameter(0)\ni = s32[] parameter(1)\nj = s32[] parameter(2)\n"
                         "ROOT ds = u64[2,3] dynamic-slice(p, i, j), dynamic_slice_sizes={2,3}",
                         {0: [4, 6]}, {1: np.int32(offsets[0]), 2: np.int32(offsets[1])},
                         runtime=lambda index: clamped)
    assert maps[0].results == (dim(0) + rt(0), dim(1) + rt(1))
    assert [v.source[1] for v in maps[0].runtime] == [1, 2]


@pytest.mark.parametrize("offset", [0, 2, 7])
def test_dynamic_update_slice_update_map(offset):
    start = min(max(offset, 0), 6 - 3)
    run_and_check("p = u64[6] parameter(0)\nu = u64[3] parameter(1)\ni = s32[] parameter(2)\n"
                  "ROOT d = u64[6] dynamic-update-slice(p, u, i)",
                  {1: [3]}, {0: np.zeros(6, np.uint64), 2: np.int32(offset)}, runtime=lambda index: (start,))


def test_canonical_gather():
    indices = np.array([[0, 1], [2, 0], [1, 3]], np.int32)
    sizes = (2, 2)

    def runtime(index):
        row = indices[index[0]]
        return tuple(min(max(int(v), 0), n - s) for v, n, s in zip(row, (4, 4), sizes))

    maps = run_and_check("p = u64[4,4] parameter(0)\nidx = s32[3,2] parameter(1)\n"
                         "ROOT g = u64[3,2,2] gather(p, idx), offset_dims={1,2}, collapsed_slice_dims={},"
                         " start_index_map={0,1}, index_vector_dim=1, slice_sizes={2,2}",
                         {0: [4, 4]}, {1: indices}, runtime=runtime)
    assert str(maps[1]) == "(d0, d1, d2)[s0] -> (d0, s0), domain: d0 in [0, 2], d1 in [0, 1], d2 in [0, 1], s0 in [0, 1]"


def test_elementwise_select_clamp_convert():
    maps = run_and_check("a = u64[2,3] parameter(0)\nb = u64[2,3] parameter(1)\nROOT s = u64[2,3] add(a, b)",
                         {0: [2, 3], 1: [2, 3]})
    assert all(m.results == (dim(0), dim(1)) for m in maps)
    module = parse_hlo("ENTRY e {\n c = pred[2,3] parameter(0)\n a = f32[2,3] parameter(1)\n"
                       " lo = f32[] parameter(2)\n s = f32[2,3] select(c, a, a)\n"
                       " k = f32[2,3] clamp(lo, s, lo)\n ROOT v = s32[2,3] convert(k)\n}\n")
    sel, clamp, conv = (module.entry.instructions[i] for i in (3, 4, 5))
    assert [m.results for m in output_to_input(sel)] == [(dim(0), dim(1))] * 3
    assert [m.results for m in output_to_input(clamp)] == [(), (dim(0), dim(1)), ()]
    assert output_to_input(conv)[0].results == (dim(0), dim(1))


def test_iota_and_undefined_ops():
    module = parse_hlo("ENTRY e {\n p = f32[4] parameter(0)\n i = s32[4] iota(), iota_dimension=0\n"
                       " ROOT s = (f32[4], s32[4]) sort(p, i), dimensions={0}, to_apply=lt\n}\n"
                       "lt {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n c = s32[] parameter(2)\n"
                       " d = s32[] parameter(3)\n ROOT r = pred[] compare(a, b), direction=LT\n}\n")
    iota, sort = module.entry.instructions[1], module.entry.root
    assert output_to_input(iota) == []
    assert output_to_input(sort) == [None, None]


def test_scatter_update_to_operand():
    module = parse_hlo("add {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b)\n}\n"
                       "ENTRY e {\n p = f32[10,8] parameter(0)\n i = s32[5,1] parameter(1)\n"
                       " u = f32[5,3,8] parameter(2)\n ROOT s = f32[10,8] scatter(p, i, u), update_window_dims={1,2},"
                       " inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add\n}\n")
    m = scatter_update_to_operand(module.entry.root)
    assert str(m) == ("(d0, d1, d2){r0} -> (d1 + r0, d2), domain: d0 in [0, 4], d1 in [0, 2], d2 in [0, 7],"
                      " r0 in [0, 7]")
    assert output_to_input(module.entry.root)[1:] == [None, None]
    assert m.symbols == () and sym(0) not in m.results
