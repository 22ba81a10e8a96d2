"""Bounded dynamism (`<=N`, set-dimension-size, SliceToDynamic, PadToStatic; runtime/bounded.py):
one cpu compile per module runs every size up to the bound, at the runtime size, with results at
their runtime shapes. References: numpy (XLA's semantics written out) and the interpreter (the
evaluator on the module specialized to each size); every cpu kernel bounds-checked."""

from __future__ import annotations

import re

import numpy as np
import pytest

import hlocc
from corpus import XLA_DIR, require
from hlocc.errors import ArgumentError, UnsupportedError
from hlocc.runtime.bounded import has_bounded_dynamism

_BOUNDED = re.compile(r"<=\d|SliceToDynamic|PadToStatic|set-dimension-size")


def _corpus_files() -> list[str]:
    """The XLA corpus files whose entry uses bounded dynamism (the import test keeps its
    set-dimension-size in a computation nothing calls)."""
    if not XLA_DIR.is_dir():
        return []
    return sorted(p.name for p in XLA_DIR.glob("*.hlo") if _BOUNDED.search(p.read_text())
                  and has_bounded_dynamism(hlocc.parse_hlo_file(p)))


def _slice_to_dynamic(x):
    return x[:, :1, :]  # its constant sizes (2, 1, 2)


def _pad_to_static(x):
    padded = np.zeros((2, 2, 2), x.dtype)
    padded[:, :x.shape[1], :] = x
    return (padded, *(np.int32(d) for d in x.shape))


REFERENCES = {
    "hlo_to_mhlo__import_bounded_dynamism__0.hlo": lambda x: np.broadcast_to(x[:, :, None, :], (1, 16, 1, x.shape[2])),
    "hlo_to_mhlo__import_bounded_dynamism__1.hlo": lambda x: x,
    "hlo_to_mhlo__import_bounded_dynamism__2.hlo": lambda x: x,
    "gpu_tests__slice_to_dynamic.hlo": _slice_to_dynamic,
    "gpu_tests__calling_convention.hlo": _slice_to_dynamic,
    "gpu_tests__pad_to_static.hlo": _pad_to_static,
}


def _sizes(bound: int) -> list[int]:
    """0, 1, the bound and a prime below it."""
    primes = [p for p in (701, 37, 7, 5, 3, 2) if p < bound]
    return sorted({0, 1, bound, *primes[:1]})


def _arguments(module, sizes_by_dim, rng) -> list[np.ndarray]:
    args = []
    for param in module.entry.parameters:
        shape = param.shape
        dims = [sizes_by_dim(d, size) if dyn else size for d, (size, dyn) in enumerate(zip(shape.dims, shape.dynamic))]
        if shape.element_type.is_pred:
            args.append(rng.random(dims) < 0.5)
        elif shape.element_type.is_integer:
            args.append(rng.integers(-100, 100, dims).astype(shape.dtype))
        else:
            args.append(rng.standard_normal(dims).astype(shape.dtype))
    return args


def _assert_same(got, want):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            _assert_same(g, w)
        return
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    np.testing.assert_array_equal(got, want)


@pytest.fixture(scope="module", params=_corpus_files() or ["(no corpus)"])
def corpus_case(request):
    require(XLA_DIR)
    text = (XLA_DIR / request.param).read_text()
    return request.param, hlocc.parse_hlo(text), hlocc.compile(text, "cpu", check_bounds=True), \
        hlocc.compile(text, "interpreter")


def test_the_corpus_has_the_bounded_files():
    require(XLA_DIR)
    assert set(REFERENCES) <= set(_corpus_files())


def test_corpus_file_runs_at_every_size_with_one_compile(corpus_case):
    name, module, exe, interpreter = corpus_case
    bounds = sorted({s for p in module.entry.parameters for s, dyn in zip(p.shape.dims, p.shape.dynamic) if dyn})
    rng = np.random.default_rng(0)
    cases = [lambda d, bound, n=n: min(n, bound) for n in _sizes(max(bounds, default=0))] or [lambda d, bound: bound]
    if len([dyn for p in module.entry.parameters for dyn in p.shape.dynamic if dyn]) > 1:  # mixed sizes per dim
        cases.append(lambda d, bound: (0, 37)[d % 2])
        cases.append(lambda d, bound: (bound, 1)[d % 2])
    for sizes in cases:
        args = _arguments(module, sizes, rng)
        got = exe(*args)
        if name in REFERENCES:
            _assert_same(got, REFERENCES[name](*args))
        _assert_same(got, interpreter(*args))
    assert exe.compilations <= 1  # (0: a convert pred -> pred needs no kernel)
    assert getattr(exe, "program", True) is not None, exe.plan_reason


def test_corpus_file_rejects_a_size_above_its_bound(corpus_case):
    _, module, exe, _ = corpus_case
    params = module.entry.parameters
    bounded = [(i, d, size) for i, p in enumerate(params) for d, (size, dyn) in enumerate(zip(p.shape.dims,
                                                                                              p.shape.dynamic)) if dyn]
    if not bounded:
        pytest.skip("no bounded parameter")
    i, d, bound = bounded[0]
    args = _arguments(module, lambda dim, size: size + (dim == d), np.random.default_rng(0))
    with pytest.raises(ArgumentError, match=rf"argument {i} \('{re.escape(params[i].name)}'\) dimension {d}: "
                                            rf"size {bound + 1} exceeds its bound {bound}"):
        exe(*args)


# -- sizes computed by the program ---------------------------------------------------------------

SET_SIZE = """HloModule set_size
ENTRY e (x: f32[4,6], n: s32[]) -> f32[4,<=6] {
  x = f32[4,6] parameter(0)
  n = s32[] parameter(1)
  ROOT s = f32[4,<=6] set-dimension-size(x, n), dimensions={1}
}
"""

# The size is computed (the rows of a bounded argument minus one, at least 0), the set size grows a
# bounded operand (elements past its size are the padding: zeros), a reduction runs over the
# runtime rows only, and PadToStatic/SliceToDynamic round-trip the result.
COMPUTED = """HloModule computed
addf { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
ENTRY e (x: f32[<=8,3], y: f32[<=5]) -> (f32[<=6], s32[], f32[3], f32[<=5], (f32[5], s32[]), f32[<=5]) {
  x = f32[<=8,3] parameter(0)
  y = f32[<=5] parameter(1)
  rows = s32[] get-dimension-size(x), dimensions={0}
  one = s32[] constant(1)
  less = s32[] subtract(rows, one)
  zero_i = s32[] constant(0)
  n = s32[] maximum(less, zero_i)
  w = f32[6] iota(), iota_dimension=0
  set = f32[<=6] set-dimension-size(w, n), dimensions={0}
  e = f32[<=6] exponential(set)
  zero = f32[] constant(0)
  sum = f32[3] reduce(x, zero), dimensions={0}, to_apply=addf
  m = s32[] constant(5)
  grown = f32[<=5] set-dimension-size(y, m), dimensions={0}
  padded = (f32[5], s32[]) custom-call(y), custom_call_target="PadToStatic"
  data = f32[5] get-tuple-element(padded), index=0
  k = s32[] get-tuple-element(padded), index=1
  back = f32[<=5] custom-call(data, k), custom_call_target="SliceToDynamic"
  ROOT t = (f32[<=6], s32[], f32[3], f32[<=5], (f32[5], s32[]), f32[<=5]) tuple(e, rows, sum, grown, padded, back)
}
"""


def _computed_reference(x, y):
    n = max(x.shape[0] - 1, 0)
    grown = np.zeros(5, np.float32)
    grown[:y.shape[0]] = y
    return (np.exp(np.arange(n, dtype=np.float32)), np.int32(x.shape[0]), x.sum(0, dtype=np.float32), grown,
            (grown, np.int32(y.shape[0])), y)


@pytest.fixture(scope="module")
def set_size():
    return hlocc.compile(SET_SIZE, "cpu", check_bounds=True)


@pytest.fixture(scope="module")
def computed():
    return hlocc.compile(COMPUTED, "cpu", check_bounds=True)


def test_set_dimension_size_takes_the_value_of_a_parameter(set_size):
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    for n in (0, 1, 5, 6, 3):
        _assert_same(set_size(x, np.int32(n)), x[:, :n])
    assert set_size.compilations == 1 and set_size.program is not None
    for bad in (7, -1):
        with pytest.raises(ArgumentError, match=rf"set-dimension-size 's' dimension 1: size {bad} is outside "
                                                r"\[0, 6\] \(its bound\)"):
            set_size(x, np.int32(bad))


def test_computed_sizes_pad_to_static_and_back(computed):
    interpreter = hlocc.compile(COMPUTED, "interpreter")
    rng = np.random.default_rng(1)
    for rows, length in ((0, 0), (1, 5), (7, 2), (5, 1), (2, 3)):
        x = rng.standard_normal((rows, 3)).astype(np.float32)
        y = rng.standard_normal(length).astype(np.float32)
        got = computed(x, y)
        want = _computed_reference(x, y)
        for g, w in zip(got, want):
            if isinstance(w, np.ndarray) and w.dtype == np.float32:
                np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
                assert g.shape == w.shape
            else:
                _assert_same(g, w)
        for g, w in zip(got, interpreter(x, y)):
            _assert_same(g, w) if not isinstance(w, np.ndarray) or w.dtype != np.float32 else \
                np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
    assert computed.compilations == 1 and computed.program is not None, computed.plan_reason


def test_a_computed_size_above_its_bound_names_the_instruction(computed):
    x = np.zeros((8, 3), np.float32)  # 8 rows: the set size 7 exceeds its bound 6
    with pytest.raises(ArgumentError, match=r"set-dimension-size 'set' dimension 0: size 7 is outside \[0, 6\]"):
        computed(x, np.zeros(1, np.float32))
    with pytest.raises(ArgumentError, match=r"argument 0 \('x'\) dimension 0: size 9 exceeds its bound 8"):
        computed(np.zeros((9, 3), np.float32), np.zeros(1, np.float32))
    with pytest.raises(ArgumentError, match=r"argument 1 \('y'\): expected shape f32\[<=5\], got an array of "
                                            r"shape \[2, 2\]"):
        computed(x[:2], np.zeros((2, 2), np.float32))


def test_the_bounded_module_prints_its_variables_and_guards(computed):
    text = computed.module.to_string()
    assert "x = f32[?arg0_d0,3] parameter(0)" in text
    assert "// guard: arg0_d0 <= 8:" in text
    assert "u8[?set_d0] parameter(2)" in text  # the computed size, passed as a dimension


CHAIN = """HloModule chain
ENTRY e (x: f32[8], n: s32[], y: f32[8]) -> (f32[<=8], f32[<=8]) {
  x = f32[8] parameter(0)
  n = s32[] parameter(1)
  y = f32[8] parameter(2)
  a = f32[<=8] set-dimension-size(x, n), dimensions={0}
  k = s32[] get-dimension-size(a), dimensions={0}
  two = s32[] constant(2)
  k2 = s32[] multiply(k, two)
  b = f32[<=8] set-dimension-size(y, k2), dimensions={0}
  ROOT t = (f32[<=8], f32[<=8]) tuple(a, b)
}
"""


def test_a_size_computed_from_an_earlier_set_size():
    exe = hlocc.compile(CHAIN, "cpu", check_bounds=True)
    x = np.arange(8, dtype=np.float32)
    for n in (0, 1, 3, 4):
        a, b = exe(x, np.int32(n), -x)
        _assert_same(a, x[:n])
        _assert_same(b, -x[:2 * n])
    assert exe.compilations == 1
    with pytest.raises(ArgumentError, match=r"set-dimension-size 'b' dimension 0: size 10 is outside \[0, 8\]"):
        exe(x, np.int32(5), -x)


def test_a_size_set_inside_a_loop_body_is_refused():
    text = """HloModule loop
body { p = (s32[], f32[4]) parameter(0)  i = s32[] get-tuple-element(p), index=0
  v = f32[4] get-tuple-element(p), index=1  s = f32[<=4] set-dimension-size(v, i), dimensions={0}
  one = s32[] constant(1)  j = s32[] add(i, one)  ROOT t = (s32[], f32[4]) tuple(j, v) }
cond { p = (s32[], f32[4]) parameter(0)  i = s32[] get-tuple-element(p), index=0  n = s32[] constant(3)
  ROOT c = pred[] compare(i, n), direction=LT }
ENTRY e { x = f32[4] parameter(0)  z = s32[] constant(0)  t = (s32[], f32[4]) tuple(z, x)
  ROOT w = (s32[], f32[4]) while(t), condition=cond, body=body }
"""
    with pytest.raises(UnsupportedError, match=r"set-dimension-size 's' in computation 'body': a size set outside "
                                               r"the entry computation"):
        hlocc.compile(text, "cpu")


MLP = """HloModule mlp
addf { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
maxf { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] maximum(a, b) }
ENTRY e (x: f32[<=64,16], w: f32[16,8], b: f32[8]) -> (f32[<=64,8], f32[8], f32[<=64,8]) {
  x = f32[<=64,16] parameter(0)
  w = f32[16,8] parameter(1)
  b = f32[8] parameter(2)
  d = f32[<=64,8] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bb = f32[<=64,8] broadcast(b), dimensions={1}
  s = f32[<=64,8] add(d, bb)
  z = f32[] constant(0)
  zb = f32[<=64,8] broadcast(z), dimensions={}
  r = f32[<=64,8] maximum(s, zb)
  tot = f32[8] reduce(r, z), dimensions={0}, to_apply=addf
  ninf = f32[] constant(-inf)
  m = f32[<=64] reduce(s, ninf), dimensions={1}, to_apply=maxf
  mb = f32[<=64,8] broadcast(m), dimensions={0}
  ex = f32[<=64,8] exponential(f32[<=64,8] subtract(s, mb))
  den = f32[<=64] reduce(ex, z), dimensions={1}, to_apply=addf
  db = f32[<=64,8] broadcast(den), dimensions={0}
  sm = f32[<=64,8] divide(ex, db)
  ROOT t = (f32[<=64,8], f32[8], f32[<=64,8]) tuple(r, tot, sm)
}
"""


@pytest.mark.slow
def test_a_bounded_batch_through_a_dot_and_a_softmax():
    exe = hlocc.compile(MLP, "cpu", check_bounds=True)
    rng = np.random.default_rng(2)
    w = rng.standard_normal((16, 8)).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    for n in (0, 1, 37, 64, 13):
        x = rng.standard_normal((n, 16)).astype(np.float32)
        relu, total, softmax = exe(x, w, b)
        s = x @ w + b
        np.testing.assert_allclose(relu, np.maximum(s, 0), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(total, np.maximum(s, 0).sum(0), rtol=1e-4, atol=1e-4)
        e = np.exp(s - s.max(1, keepdims=True)) if n else s
        np.testing.assert_allclose(softmax, e / e.sum(1, keepdims=True) if n else s, rtol=1e-5, atol=1e-6)
        assert softmax.shape == (n, 8)
    assert exe.compilations == 1 and exe.program is not None and not exe.program.deferred


def test_an_unbounded_dimension_is_a_variable_without_a_bound():
    exe = hlocc.compile("""HloModule unbounded
ENTRY %unbounded (Arg_0.1: f32[?,784]) -> f32[?,784] {
  %Arg_0.1 = f32[?,784] parameter(0)
  ROOT %abs.2 = f32[?,784] abs(f32[?,784] %Arg_0.1)
}
""", "cpu", check_bounds=True)
    rng = np.random.default_rng(3)
    for n in (0, 1, 3, 2000):
        x = rng.standard_normal((n, 784)).astype(np.float32)
        _assert_same(exe(x), np.abs(x))
    assert exe.compilations == 1 and not exe.module.guards
    with pytest.raises(ArgumentError, match=r"argument 0 \('Arg_0.1'\): expected shape f32\[\?,784\], got an array "
                                            r"of shape \[3, 7\]"):
        exe(np.zeros((3, 7), np.float32))


def test_sizes_no_argument_sets_are_refused_on_cpu_and_evaluated_at_the_bound_by_the_interpreter():
    text = """HloModule reshape
ENTRY e (p: s32[6]) -> s32[<=6,<=6] {
  p = s32[6] parameter(0)
  a = s32[] constant(3)
  b = s32[] constant(2)
  ROOT r = s32[<=6,<=6] dynamic-reshape(p, a, b)
}
"""
    with pytest.raises(UnsupportedError, match=r"instruction 'r' \(s32\[\?d0,\?d1\]\): its dynamic dimension is set by "
                                               r"neither an argument nor a set-dimension-size/SliceToDynamic"):
        hlocc.compile(text, "cpu")
    x = np.arange(6, dtype=np.int32)
    _assert_same(hlocc.compile(text, "interpreter")(x), x.reshape(3, 2))
