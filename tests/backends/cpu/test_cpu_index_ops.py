"""The index ops inside loop fusions on the CPU backend (default target: per-thread vector loops),
compared with the evaluator exactly.

Each op has a seeded generator of random cases: odd sizes, size-1 and size-0 dimensions, non-default
layouts ({0,1}, {0,2,1}, ...) on parameters, intermediates and outputs, and the op's own variety
(strided slices, negative and interior padding, 2-4 concatenated operands along any dimension,
out-of-range dynamic-slice starts, iota of every type, ...). Then chains of index and elementwise ops,
multi-output fusions, and fusions that read a value at two indexings (the partitioner gives it a
function of its own). A few seeds per generator run by default; many more under `-m slow`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from _cpu_helpers import T, assert_exact, random_values, run_both

from hlocc.errors import UnsupportedError
from hlocc.evaluator.numerics import int_bounds

DEFAULT_SEEDS = range(4)
SLOW_SEEDS = range(4, 40)


def seeds(default=DEFAULT_SEEDS, slow=SLOW_SEEDS):
    return [*default, *[pytest.param(s, marks=pytest.mark.slow) for s in slow]]


# -- cases ------------------------------------------------------------------------------------------------


def shape(type_name: str, dims, layout=None) -> str:
    text = f"{type_name}[{','.join(map(str, dims))}]"
    return text + ("{" + ",".join(map(str, layout)) + "}" if layout is not None else "")


@dataclass
class Case:
    """A loop fusion: its parameters (shape texts), body (instruction lines, the last the root) and
    arguments."""

    params: list[str]
    body: list[str]
    inputs: list[np.ndarray]

    @property
    def root_shape(self) -> str:
        """The root's declared shape (layout included), which the fusion instruction repeats."""
        text = self.body[-1].split(" = ", 1)[1]
        if not text.startswith("("):
            return text.split(" ", 1)[0]
        depth = 0
        for i, c in enumerate(text):
            depth += {"(": 1, ")": -1}.get(c, 0)
            if depth == 0:
                return text[: i + 1]
        raise ValueError(f"unbalanced tuple shape in {self.body[-1]!r}")

    def text(self) -> str:
        fused = [f"  p{i} = {s} parameter({i})" for i, s in enumerate(self.params)]
        fused += [f"  {line}" for line in self.body[:-1]] + [f"  ROOT {self.body[-1]}"]
        entry = [f"  a{i} = {s} parameter({i})" for i, s in enumerate(self.params)]
        args = ", ".join(f"a{i}" for i in range(len(self.params)))
        entry.append(f"  ROOT f = {self.root_shape} fusion({args}), kind=kLoop, calls=fused")
        return "HloModule m\n\nfused {\n" + "\n".join(fused) + "\n}\n\nENTRY main {\n" + "\n".join(entry) + "\n}\n"


def check(case: Case) -> None:
    got, ref = run_both(case.text(), case.inputs)
    assert len(got) == len(ref)
    for k, (g, r) in enumerate(zip(got, ref)):
        assert_exact(g, r, [], f"output {k} of\n{case.text()}")


class Gen:
    """Random pieces of cases, from one seed."""

    TYPES = ["f32", "s32", "s8", "u16", "bf16", "f64", "pred", "s4", "u8", "f16", "s64"]

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)

    def int(self, lo: int, hi: int) -> int:
        return int(self.rng.integers(lo, hi, endpoint=True))

    def choice(self, items):
        return items[self.int(0, len(items) - 1)]

    def type(self) -> str:
        return "f32" if self.rng.random() < 0.4 else self.choice(self.TYPES)

    def dims(self, rank: int, lo: int = 1, hi: int = 7) -> list[int]:
        """Odd sizes mostly, some 1s."""
        return [1 if self.rng.random() < 0.15 else self.choice([3, 5, 7, 2, 4, 6, 9, 11, 13][: hi]) for _ in range(rank)]

    def layout(self, rank: int) -> list[int]:
        """The default layout half the time, else a random one ({0,1}, {0,2,1}, ...)."""
        default = list(range(rank - 1, -1, -1))
        return default if self.rng.random() < 0.5 else [int(d) for d in self.rng.permutation(rank)]

    def array(self, type_name: str, dims) -> np.ndarray:
        n = int(np.prod(dims, dtype=np.int64))
        pt = T[type_name]
        if pt.is_float:
            values = (self.rng.standard_normal(n) * 10).astype(np.float32).astype(pt.dtype)
        else:
            values = random_values(type_name, n, self.rng)
        return values.reshape(dims)


# -- one op at a time -------------------------------------------------------------------------------------

def transpose_case(g: Gen) -> Case:
    rank = g.int(2, 4)
    t, dims = g.type(), g.dims(rank)
    perm = [int(d) for d in g.rng.permutation(rank)]
    out = [dims[p] for p in perm]
    return Case([shape(t, dims, g.layout(rank))],
                [f"r = {shape(t, out, g.layout(rank))} transpose(p0), dimensions={{{','.join(map(str, perm))}}}"], [g.array(t, dims)])


def broadcast_case(g: Gen) -> Case:
    out_rank = g.int(1, 4)
    rank = g.int(0, out_rank)
    out = g.dims(out_rank)
    mapped = sorted(int(d) for d in g.rng.choice(out_rank, rank, replace=False))
    t = g.type()
    dims = [out[d] for d in mapped]
    return Case([shape(t, dims, g.layout(rank))],
                [f"r = {shape(t, out, g.layout(out_rank))} broadcast(p0), dimensions={{{','.join(map(str, mapped))}}}"], [g.array(t, dims)])


def _factor(g: Gen, n: int, rank: int) -> list[int]:
    """A random shape of `rank` dimensions with `n` elements."""
    dims = [1] * rank
    for p in _prime_factors(n):
        dims[g.int(0, rank - 1)] *= p
    return dims


def _prime_factors(n: int) -> list[int]:
    out, p = [], 2
    while n > 1:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out


def reshape_case(g: Gen) -> Case:
    t, dims = g.type(), g.dims(g.int(1, 4))
    n = int(np.prod(dims))
    out = _factor(g, n, g.int(1, 4))
    return Case([shape(t, dims, g.layout(len(dims)))], [f"r = {shape(t, out, g.layout(len(out)))} reshape(p0)"], [g.array(t, dims)])


BITCAST_TYPES = {"f32": "s32", "s32": "f32", "u16": "bf16", "bf16": "f16", "f16": "s16", "f64": "u64",
                 "s64": "f64", "s8": "u8", "u8": "s8"}


def bitcast_case(g: Gen) -> Case:
    """A bitcast between shapes whose elements are in the same memory order (another layout, another
    dimension split, maybe another element type of the same width)."""
    t, dims = g.type(), g.dims(g.int(1, 4))
    layout = g.layout(len(dims))
    physical = [dims[d] for d in reversed(layout)]
    out_physical = _factor(g, int(np.prod(physical)), g.int(1, 4))
    out_layout = g.layout(len(out_physical))
    out = [0] * len(out_physical)
    for k, d in enumerate(reversed(out_layout)):
        out[d] = out_physical[k]
    out_type = BITCAST_TYPES.get(t, t) if g.rng.random() < 0.4 else t
    return Case([shape(t, dims, layout)], [f"r = {shape(out_type, out, out_layout)} bitcast(p0)"], [g.array(t, dims)])


def slice_case(g: Gen) -> Case:
    t, dims = g.type(), g.dims(g.int(1, 4), hi=9)
    spec, out = [], []
    for d in dims:
        start = g.int(0, d - 1)
        limit = g.int(start + 1, d)
        stride = g.int(1, 3)
        spec.append(f"[{start}:{limit}:{stride}]")
        out.append(-(-(limit - start) // stride))
    return Case([shape(t, dims, g.layout(len(dims)))],
                [f"r = {shape(t, out, g.layout(len(out)))} slice(p0), slice={{{', '.join(spec)}}}"], [g.array(t, dims)])


def reverse_case(g: Gen) -> Case:
    t, dims = g.type(), g.dims(g.int(1, 4))
    rev = sorted(int(d) for d in g.rng.choice(len(dims), g.int(1, len(dims)), replace=False))
    return Case([shape(t, dims, g.layout(len(dims)))],
                [f"r = {shape(t, dims, g.layout(len(dims)))} reverse(p0), dimensions={{{','.join(map(str, rev))}}}"], [g.array(t, dims)])


def copy_case(g: Gen) -> Case:
    """A layout-changing copy (XLA's physical transpose)."""
    t, dims = g.type(), g.dims(g.int(2, 4))
    return Case([shape(t, dims, g.layout(len(dims)))], [f"r = {shape(t, dims, g.layout(len(dims)))} copy(p0)"], [g.array(t, dims)])


def pad_case(g: Gen) -> Case:
    """Negative and positive edge padding, interior padding; the padding value a parameter or a constant."""
    t, dims = g.type(), g.dims(g.int(1, 3))
    spec, out = [], []
    for d in dims:
        interior = g.int(0, 2)
        stretched = (d - 1) * (interior + 1) + 1
        lo = g.int(-min(2, stretched - 1), 3)
        hi = g.int(-min(2, stretched + lo - 1), 3)
        spec.append(f"{lo}_{hi}_{interior}")
        out.append(lo + stretched + hi)
    value_param = g.rng.random() < 0.5
    params = [shape(t, dims, g.layout(len(dims)))] + ([shape(t, [])] if value_param else [])
    value = "p1" if value_param else "v"
    body = [] if value_param else [f"v = {shape(t, [])} constant({'true' if t == 'pred' else 1})"]
    body.append(f"r = {shape(t, out, g.layout(len(out)))} pad(p0, {value}), padding={'x'.join(spec)}")
    inputs = [g.array(t, dims)] + ([g.array(t, [])] if value_param else [])
    return Case(params, body, inputs)


def concatenate_case(g: Gen) -> Case:
    """2-4 operands along any dimension; sometimes one of size 1 along it."""
    t, rank = g.type(), g.int(1, 3)
    dims = g.dims(rank)
    axis = g.int(0, rank - 1)
    parts = []
    for _ in range(g.int(2, 4)):
        part = list(dims)
        part[axis] = g.choice([1, 2, 3, 5])
        parts.append(part)
    out = list(dims)
    out[axis] = sum(p[axis] for p in parts)
    names = ", ".join(f"p{i}" for i in range(len(parts)))
    return Case([shape(t, p, g.layout(rank)) for p in parts],
                [f"r = {shape(t, out, g.layout(rank))} concatenate({names}), dimensions={{{axis}}}"], [g.array(t, p) for p in parts])


def _start_type(g: Gen) -> str:
    return g.choice(["s32", "s64", "u32", "u64", "s8", "u8", "s16"])


def _starts(g: Gen, type_name: str, dims, window) -> list[np.ndarray]:
    """Start indices, often out of range (negative, past the end, or huge: clamped)."""
    lo, hi = int_bounds(T[type_name])
    values = []
    for d, w in zip(dims, window):
        v = g.choice([g.int(0, d - w), g.int(-6, -1), g.int(d - w + 1, d + 6), lo, hi, hi // 2 + 3])
        values.append(np.array(min(max(v, lo), hi), dtype=np.uint64 if lo == 0 else np.int64).astype(T[type_name].dtype))
    return values


def dynamic_slice_case(g: Gen) -> Case:
    t, dims = g.type(), g.dims(g.int(1, 3), hi=9)
    window = [g.int(1, d) for d in dims]
    st = _start_type(g)
    starts = _starts(g, st, dims, window)
    params = [shape(t, dims, g.layout(len(dims)))] + [shape(st, [])] * len(dims)
    names = ", ".join(f"p{i + 1}" for i in range(len(dims)))
    return Case(params, [f"r = {shape(t, window, g.layout(len(window)))} dynamic-slice(p0, {names}), "
                         f"dynamic_slice_sizes={{{','.join(map(str, window))}}}"], [g.array(t, dims), *starts])


def dynamic_update_slice_case(g: Gen) -> Case:
    t, dims = g.type(), g.dims(g.int(1, 3), hi=9)
    window = [g.int(1, d) for d in dims]
    st = _start_type(g)
    starts = _starts(g, st, dims, window)
    params = [shape(t, dims, g.layout(len(dims))), shape(t, window, g.layout(len(dims)))] + [shape(st, [])] * len(dims)
    names = ", ".join(f"p{i + 2}" for i in range(len(dims)))
    return Case(params, [f"r = {shape(t, dims, g.layout(len(dims)))} dynamic-update-slice(p0, p1, {names})"], [g.array(t, dims), g.array(t, window), *starts])


@pytest.mark.parametrize("start_type,start", [("u64", 2**64 - 1), ("u64", 2**63 + 5), ("u32", 2**32 - 1),
                                              ("s64", -(2**63)), ("s8", -128), ("u8", 255)])
def test_dynamic_slice_extreme_starts(start_type, start):
    """Starts far out of range clamp to the nearest end (u64 ones of 2^63 and more are not negative)."""
    pt = T[start_type]
    i = np.array(start, dtype=np.uint64 if pt.is_unsigned else np.int64).astype(pt.dtype)
    operand = np.arange(40, dtype=np.int32).reshape(10, 4)
    check(Case(["s32[10,4]", shape(start_type, [])], ["r = s32[3,2] dynamic-slice(p0, p1, p1), dynamic_slice_sizes={3,2}"], [operand, i]))
    check(Case(["s32[10,4]", "s32[3,2]", shape(start_type, [])], ["r = s32[10,4] dynamic-update-slice(p0, p1, p2, p2)"], [operand, np.full((3, 2), -1, np.int32), i]))


@pytest.mark.parametrize("start", [-5, 0, 3, 100])
def test_dynamic_slices_of_computed_values(start):
    """The operand, update and starts of dynamic-(update-)slice computed in the fusion, then a pad."""
    g = Gen(1)
    body = ["n = f32[2,3] negate(p1)", "one = s32[] constant(1)", "i = s32[] add(p2, one)",
            "b = f32[6,5] broadcast(p3), dimensions={}", "a = f32[6,5]{0,1} add(p0, b)",
            "u = f32[6,5] dynamic-update-slice(a, n, i, p2)",
            "d = f32[2,3] dynamic-slice(u, p2, i), dynamic_slice_sizes={2,3}",
            "e = f32[6,5] pad(d, p3), padding=2_2x1_1", "r = f32[6,5] add(u, e)"]
    check(Case(["f32[6,5]{0,1}", "f32[2,3]", "s32[]", "f32[]"], body,
               [g.array("f32", [6, 5]), g.array("f32", [2, 3]), np.int32(start), np.float32(0.5)]))


def test_multi_output_fusion_of_different_sizes_is_rejected_or_right():
    params = ["s32[10,4]", "s32[3,2]", "s32[]"]
    body = ["d = s32[3,2] dynamic-slice(p0, p2, p2), dynamic_slice_sizes={3,2}",
            "u = s32[10,4] dynamic-update-slice(p0, p1, p2, p2)", "r = (s32[3,2], s32[10,4]) tuple(d, u)"]
    case = Case(params, body, [np.arange(40, dtype=np.int32).reshape(10, 4), np.full((3, 2), -1, np.int32), np.int32(2)])
    try:
        got, ref = run_both(case.text(), case.inputs)
    except UnsupportedError:
        return
    for g, r in zip(got, ref):
        assert_exact(g, r, [])


IOTA_TYPES = ["s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "s4", "u4", "f16", "bf16", "f32", "f64",
              "f8e4m3fn", "f8e5m2"]


def iota_case(g: Gen, type_name: str) -> Case:
    rank = g.int(1, 3)
    dims = g.dims(rank)
    axis = g.int(0, rank - 1)
    return Case([], [f"r = {shape(type_name, dims, g.layout(rank))} iota(), iota_dimension={axis}"], [])


GENERATORS = {"transpose": transpose_case, "broadcast": broadcast_case, "reshape": reshape_case,
              "bitcast": bitcast_case, "slice": slice_case, "reverse": reverse_case, "copy": copy_case,
              "pad": pad_case, "concatenate": concatenate_case, "dynamic-slice": dynamic_slice_case,
              "dynamic-update-slice": dynamic_update_slice_case}


# Cases that kill the process (none since bf16 stays i16 storage in LLVM; a bf16 transposing copy used
# to abort LLVM's instruction selection: see test_bf16_transposing_copy_compiles, which runs it in a child).
ABORTS: dict = {}


def _index_op_params():
    params = []
    for op in GENERATORS:
        for seed in [*DEFAULT_SEEDS, *SLOW_SEEDS]:
            marks = [] if seed in DEFAULT_SEEDS else [pytest.mark.slow]
            if (op, seed) in ABORTS:
                marks.append(pytest.mark.skip(reason=ABORTS[op, seed]))
            params.append(pytest.param(op, seed, marks=marks, id=f"{op}-{seed}"))
    return params


@pytest.mark.parametrize("op,seed", _index_op_params())
def test_index_op(op, seed):
    check(GENERATORS[op](Gen(seed * 1000 + len(op))))


@pytest.mark.parametrize("type_name", IOTA_TYPES)
def test_iota(type_name):
    check(iota_case(Gen(len(type_name)), type_name))


CONSTANT_TYPES = ["pred", "s4", "u8", "s16", "s32", "u64", "f16", "bf16", "f32", "f64", "f8e4m3fn", "f8e5m2",
                  "f8e8m0fnu"]


@pytest.mark.parametrize("type_name", CONSTANT_TYPES)
def test_constants(type_name):
    """An array constant (a dense tensor, in a {0,1} layout) and a scalar one, with extreme values."""
    pt = T[type_name]
    if pt.is_pred:
        values = np.array([[True, False, True], [False, False, True]])
    elif pt.is_integer:
        lo, hi = int_bounds(pt)
        values = np.array([[lo, hi, 0], [1, hi - 1, lo + 1]], dtype=np.uint64 if lo == 0 else np.int64).astype(pt.dtype)
    else:
        values = np.array([[0.5, -0.0, 2.0], [-1.5, 4.0, 0.25]]).astype(np.float32).astype(pt.dtype)
        if type_name == "f8e8m0fnu":
            values = np.abs(values.astype(np.float32)).astype(pt.dtype)
    literal = "{" + ", ".join("{" + ", ".join(_literal(v) for v in row) + "}" for row in values) + "}"
    scalar = _literal(values[1, 1])
    body = [f"c = {shape(type_name, [2, 3], [0, 1])} constant({literal})", f"k = {shape(type_name, [])} constant({scalar})",
            f"b = {shape(type_name, [2, 3])} broadcast(k), dimensions={{}}", f"s = {shape(type_name, [2, 3])} select(p0, c, p1)",
            f"r = ({shape(type_name, [2, 3])}, {shape(type_name, [2, 3])}) tuple(s, b)"]
    g = Gen(3)
    check(Case(["pred[2,3]", shape(type_name, [2, 3])], body, [g.array("pred", [2, 3]), g.array(type_name, [2, 3])]))


def _literal(v) -> str:
    v = np.asarray(v)
    if v.dtype == np.bool_:
        return "true" if v else "false"
    if v.dtype.kind in "iu" or (v.dtype.kind == "V" and "int" in v.dtype.name):
        return str(int(v.astype(np.uint64 if "uint" in v.dtype.name else np.int64)))
    return repr(float(v.astype(np.float64)))


def test_map():
    """A map of a scalar computation with a constant and a compare inside."""
    text = """HloModule m

f {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  c = f32[] constant(2.5)
  m = f32[] multiply(x, c)
  l = pred[] compare(m, y), direction=LT
  ROOT s = f32[] select(l, m, y)
}

fused {
  p0 = f32[5,3]{0,1} parameter(0)
  p1 = f32[5,3] parameter(1)
  t = f32[5,3] map(p0, p1), dimensions={0,1}, to_apply=f
  ROOT r = f32[5,3]{0,1} negate(t)
}

ENTRY main {
  a0 = f32[5,3]{0,1} parameter(0)
  a1 = f32[5,3] parameter(1)
  ROOT f = f32[5,3]{0,1} fusion(a0, a1), kind=kLoop, calls=fused
}
"""
    g = Gen(5)
    inputs = [g.array("f32", [5, 3]), g.array("f32", [5, 3])]
    got, ref = run_both(text, inputs)
    assert_exact(got[0], ref[0], inputs)


# -- chains, multi-output fusions, values read at two indexings ------------------------------------------------

CHAIN_TYPES = ["f32", "s32", "bf16", "s8", "u16", "f64", "s4"]


def chain_case(g: Gen) -> Case:
    """2-6 random steps: index ops (transpose, reverse, strided slice, pad, broadcast, reshape, concatenate
    with itself) and exact elementwise ops (add or maximum with a new parameter, multiply, negate, a
    round trip through another type), every intermediate in a random layout."""
    t = g.choice(CHAIN_TYPES)
    dims = g.dims(g.int(1, 3))
    params, inputs, body = [shape(t, dims, g.layout(len(dims)))], [g.array(t, dims)], []
    cur, k = "p0", 0

    def emit(out_dims, text):
        nonlocal cur, k, dims
        k += 1
        body.append(f"v{k} = {shape(t, out_dims, g.layout(len(out_dims)))} {text}")
        cur, dims = f"v{k}", list(out_dims)

    for _ in range(g.int(2, 6)):
        rank = len(dims)
        step = g.choice(["transpose", "reverse", "slice", "pad", "broadcast", "reshape", "concatenate", "binary",
                         "multiply", "negate", "convert"])
        if step == "transpose" and rank > 1:
            perm = [int(d) for d in g.rng.permutation(rank)]
            emit([dims[p] for p in perm], f"transpose({cur}), dimensions={{{','.join(map(str, perm))}}}")
        elif step == "reverse":
            emit(dims, f"reverse({cur}), dimensions={{{g.int(0, rank - 1)}}}")
        elif step == "slice" and max(dims) > 1:
            spec = [(g.int(0, (d - 1) // 2), d, g.int(1, 2)) for d in dims]
            emit([-(-(hi - lo) // s) for lo, hi, s in spec],
                 f"slice({cur}), slice={{{', '.join(f'[{lo}:{hi}:{s}]' for lo, hi, s in spec)}}}")
        elif step == "pad":
            spec = [(g.int(-1 if d > 1 else 0, 2), g.int(0, 2), g.int(0, 1)) for d in dims]
            body.append(f"z{k} = {shape(t, [])} constant(0)")
            emit([lo + (d - 1) * (i + 1) + 1 + hi for d, (lo, hi, i) in zip(dims, spec)],
                 f"pad({cur}, z{k}), padding={'x'.join(f'{lo}_{hi}_{i}' for lo, hi, i in spec)}")
        elif step == "broadcast" and rank < 4 and np.prod(dims) < 300:
            emit([g.choice([2, 3])] + dims, f"broadcast({cur}), dimensions={{{','.join(str(d + 1) for d in range(rank))}}}")
        elif step == "reshape":
            emit(_factor(g, int(np.prod(dims)), g.int(1, 3)), f"reshape({cur})")
        elif step == "concatenate":
            axis = g.int(0, rank - 1)
            emit([d * 2 if i == axis else d for i, d in enumerate(dims)],
                 f"concatenate({cur}, {cur}), dimensions={{{axis}}}")
        elif step == "binary" and t != "pred":
            params.append(shape(t, dims, g.layout(rank)))
            inputs.append(g.array(t, dims))
            emit(dims, f"{g.choice(['add', 'maximum'])}({cur}, p{len(params) - 1})")
        elif step == "multiply":
            emit(dims, f"multiply({cur}, {cur})")
        elif step == "negate" and t[0] in "sfb":
            emit(dims, f"negate({cur})")
        elif step == "convert":
            other = g.choice(["f64", "s64", "f32"])
            body.append(f"w{k} = {shape(other, dims, g.layout(rank))} convert({cur})")
            emit(dims, f"convert(w{k})")
    if not body or not body[-1].startswith(cur):
        emit(dims, f"add({cur}, {cur})")
    return Case(params, body, inputs)


def multi_output_case(g: Gen) -> Case:
    """A tuple root of same-size results of different element types, layouts and (bitcast-compatible)
    dimensions."""
    t, dims = g.choice(["f32", "s32", "bf16", "s8"]), g.dims(g.int(1, 3))
    rank = len(dims)
    params = [shape(t, dims, g.layout(rank)), shape(t, dims, g.layout(rank))]
    body = [f"x = {shape(t, dims, g.layout(rank))} add(p0, p1)",
            f"y = {shape('f64', dims, g.layout(rank))} convert(x)",
            f"z = {shape(t, dims, g.layout(rank))} reverse(p1), dimensions={{{g.int(0, rank - 1)}}}",
            f"c = {shape('pred', dims, g.layout(rank))} compare(p0, z), direction=LT"]
    roots = [("x", t, dims), ("y", "f64", dims), ("z", t, dims), ("c", "pred", dims)]
    if rank > 1:
        flat = [int(np.prod(dims))]
        body.append(f"w = {shape(t, flat)} reshape(x)")
        roots.append(("w", t, flat))
    order = [int(i) for i in g.rng.permutation(len(roots))]
    roots = [roots[i] for i in order]
    tuple_shape = "(" + ", ".join(shape(rt, rd) for _, rt, rd in roots) + ")"
    body.append(f"r = {tuple_shape} tuple({', '.join(name for name, _, _ in roots)})")
    return Case(params, body, [g.array(t, dims), g.array(t, dims)])


@pytest.mark.parametrize("seed", seeds(range(8), range(8, 60)))
def test_chain(seed):
    check(chain_case(Gen(seed)))


@pytest.mark.parametrize("seed", seeds(range(3), range(3, 20)))
def test_multi_output_fusion(seed):
    check(multi_output_case(Gen(seed)))


TWO_INDEXINGS = {
    # An intermediate read at its own index and reversed: the partitioner gives it a function.
    "reverse": (["f32[7,5]{0,1}"], ["m = f32[7,5]{1,0} multiply(p0, p0)", "v = f32[7,5]{0,1} reverse(m), dimensions={0}",
                                   "r = f32[7,5] add(m, v)"]),
    # Neighbouring windows of a parameter and of an intermediate.
    "slices": (["s32[9,3]"], ["n = s32[9,3] negate(p0)", "a = s32[8,3] slice(n), slice={[0:8], [0:3]}",
                             "b = s32[8,3] slice(n), slice={[1:9], [0:3]}", "c = s32[8,3] slice(p0), slice={[1:9], [0:3]}",
                             "s = s32[8,3] add(a, b)", "r = s32[8,3] add(s, c)"]),
    # A square parameter read transposed and not, then broadcast along two different dimensions.
    "transpose": (["bf16[5,5]{0,1}"], ["t = bf16[5,5] transpose(p0), dimensions={1,0}", "a = bf16[5,5] add(p0, t)",
                                       "b0 = bf16[5,5,3] broadcast(a), dimensions={0,1}",
                                       "b1 = bf16[5,5,3]{0,2,1} broadcast(a), dimensions={1,0}",
                                       "r = bf16[5,5,3] maximum(b0, b1)"]),
    # One value feeding a pad, a concatenate and itself.
    "pad_concat": (["s8[3,4]"], ["x = s8[3,4] multiply(p0, p0)", "z = s8[] constant(-1)",
                                 "p = s8[3,7] pad(x, z), padding=0_0x1_2", "h = s8[3,3] slice(x), slice={[0:3], [1:4]}",
                                 "c = s8[3,7] concatenate(x, h), dimensions={1}",
                                 "s = s8[3,7] subtract(p, c)", "r = s8[3,7] xor(s, c)"]),
}


@pytest.mark.parametrize("name", list(TWO_INDEXINGS))
def test_value_read_at_two_indexings(name):
    params, body = TWO_INDEXINGS[name]
    g = Gen(len(name))
    inputs = [g.array(s.split("[")[0], [int(d) for d in s.split("[")[1].split("]")[0].split(",")]) for s in params]
    check(Case(params, body, inputs))


def test_parallel_launch():
    """Over 2^15 output elements: the blocks run on the thread pool (odd sizes, a {0,1} layout)."""
    g = Gen(11)
    body = ["t = f32[191,181] transpose(p0), dimensions={1,0}", "r = f32[191,181]{0,1} add(t, p1)"]
    check(Case(["f32[181,191]{0,1}", "f32[191,181]"], body, [g.array("f32", [181, 191]), g.array("f32", [191, 181])]))


def test_explicit_layouts():
    """{0,1} and {0,2,1} parameters and outputs around a transpose, a bitcast between layouts and a copy."""
    g = Gen(7)
    params = ["f32[3,5]{0,1}", "f32[2,3,5]{0,2,1}"]
    body = ["b = f32[2,3,5]{0,2,1} broadcast(p0), dimensions={1,2}", "s = f32[2,3,5]{0,2,1} add(b, p1)",
            "t = f32[5,3,2]{0,1,2} transpose(s), dimensions={2,1,0}", "c = f32[5,3,2]{2,1,0} copy(t)",
            "k = f32[30]{0} bitcast(t)", "r = (f32[5,3,2]{2,1,0}, f32[5,3,2]{0,1,2}, f32[30]) tuple(c, t, k)"]
    check(Case(params, body, [g.array("f32", [3, 5]), g.array("f32", [2, 3, 5])]))


# -- size 0 ---------------------------------------------------------------------------------------------------

SIZE_ZERO_CASES = {
    "concatenate_empty_first": (["f32[0,3]", "f32[4,3]"], ["r = f32[4,3] concatenate(p0, p1), dimensions={0}"]),
    "concatenate_empty_last": (["s8[2,3]", "s8[2,0]"], ["r = s8[2,3] concatenate(p0, p1), dimensions={1}"]),
    "pad_of_empty": (["f32[0]", "f32[]"], ["r = f32[5] pad(p0, p1), padding=2_3"]),
    "empty_slice_major": (["f32[4,3]"], ["r = f32[0,3] slice(p0), slice={[2:2], [0:3]}"]),
    "empty_broadcast_major": (["s32[3]"], ["r = s32[0,3] broadcast(p0), dimensions={1}"]),
    "empty_slice_minor": (["f32[4,3]"], ["r = f32[4,0] slice(p0), slice={[0:4], [1:1]}"]),
    "empty_transpose": (["f32[0,3]"], ["r = f32[3,0] transpose(p0), dimensions={1,0}"]),
}


@pytest.mark.parametrize("name", list(SIZE_ZERO_CASES))
def test_size_zero(name):
    params, body = SIZE_ZERO_CASES[name]
    g = Gen(len(name))
    inputs = [g.array(s.split("[")[0], [int(d) for d in s.split("[")[1].split("]")[0].split(",") if d]) for s in params]
    check(Case(params, body, inputs))


# -- no access out of bounds ------------------------------------------------------------------------------------

def _guard_cases() -> list[Case]:
    cases = [
        Case(["f32[17]", "f32[17]"], ["r = f32[17] add(p0, p1)"], [np.arange(17, dtype=np.float32), np.ones(17, np.float32)]),
        Case(["s4[13]"], ["r = s4[13] negate(p0)"], [Gen(1).array("s4", [13])]),
        Case(["pred[3,7]{0,1}"], ["r = pred[7,3] transpose(p0), dimensions={1,0}"], [Gen(2).array("pred", [3, 7])]),
        Case(["f32[0,3]", "f32[5,3]"], ["r = f32[5,3] concatenate(p0, p1), dimensions={0}"], [np.zeros((0, 3), np.float32), Gen(3).array("f32", [5, 3])]),
    ]
    for op, seed in [("pad", 3), ("pad", 5), ("slice", 1), ("reverse", 2), ("dynamic-slice", 1),
                     ("dynamic-slice", 2), ("dynamic-update-slice", 1), ("dynamic-update-slice", 3),
                     ("concatenate", 1), ("transpose", 2), ("bitcast", 1), ("broadcast", 1)]:
        cases.append(GENERATORS[op](Gen(seed * 1000 + len(op))))
    cases += [chain_case(Gen(s)) for s in range(3)] + [multi_output_case(Gen(1)), iota_case(Gen(1), "s8")]
    return cases


def run_guarded(cases: list[Case], tmp_path) -> str:
    """Run the cases with guard pages around every buffer (`guarded_main`) in a child process; its output."""
    import pickle
    import subprocess
    import sys
    from pathlib import Path

    path = tmp_path / "cases.pkl"
    with open(path, "wb") as f:
        pickle.dump([(c.text(), c.inputs) for c in cases], f)
    here = str(Path(__file__).resolve().parent)
    code = f"import sys; sys.path.insert(0, {here!r}); import _cpu_helpers; _cpu_helpers.guarded_main({str(path)!r})"
    proc = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, (f"exit status {proc.returncode} (-11: a fault, an access out of bounds) after\n"
                                  f"{proc.stdout[-1500:]}\n{proc.stderr[-3000:]}")
    assert "all cases ran in bounds" in proc.stdout
    return proc.stdout


def test_bf16_transposing_copy_compiles(tmp_path):
    x = np.arange(36, dtype=np.float32).reshape(9, 4).astype(T["bf16"].dtype)
    run_guarded([Case(["bf16[9,4]{1,0}"], ["r = bf16[9,4]{0,1} copy(p0)"], [x])], tmp_path)


def test_no_access_out_of_bounds(tmp_path):
    """Every buffer a kernel gets sits against an inaccessible page, after its end and then before its
    start, so a read or write out of bounds faults (in a child process, which then dies)."""
    out = run_guarded(_guard_cases(), tmp_path)
    assert "rejected" not in out


def test_multi_output_fusion_with_a_smaller_later_root_stays_in_bounds(tmp_path):
    params = ["s32[10,4]", "s32[3,2]", "s32[]"]
    body = ["d = s32[3,2] dynamic-slice(p0, p2, p2), dynamic_slice_sizes={3,2}",
            "u = s32[10,4] dynamic-update-slice(p0, p1, p2, p2)", "r = (s32[10,4], s32[3,2]) tuple(u, d)"]
    run_guarded([Case(params, body, [np.arange(40, dtype=np.int32).reshape(10, 4),
                                                                np.full((3, 2), -1, np.int32), np.int32(2)])], tmp_path)
