"""The reference evaluator's elementwise ops (evaluator/elementwise.py, evaluator/numerics.py).

Three kinds of checks:
  - integer ops against a Python-int oracle written from XLA's rules: exhaustive over all pairs
    for the types of at most 8 bits, edge values and random pairs for the wider ones;
  - hand-computed edge cases for floats, conversions, comparisons and the bit-level ops;
  - where jax is installed, agreement with jax.lax on CPU (XLA:CPU) on random inputs: bit-exact for
    integer ops, conversions, comparisons and the exactly rounded float ops (+ - * / rem, min, max,
    sqrt, rounding); within stated ulp tolerances for transcendental functions, where XLA:CPU
    uses its own polynomial approximations (see JAX_ULPS).
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from hlocc.errors import UnsupportedError
from hlocc.evaluator import Evaluator
from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.opcodes import OPCODES
from hlocc.hlo.types import PRIMITIVE_TYPES, Shape, shape_of_array

T = PRIMITIVE_TYPES


def evaluate(opcode: str, result_type: str, *operands, dims=None, **attrs) -> np.ndarray:
    """Evaluate one instruction `opcode` with result element type `result_type` on `operands`."""
    operands = [np.asarray(o) for o in operands]
    params = [HloInstruction(f"p{i}", "parameter", shape_of_array(o), parameter_number=i)
              for i, o in enumerate(operands)]
    if dims is None:
        dims = np.broadcast_shapes(*(o.shape for o in operands))
    instr = HloInstruction("x", opcode, Shape.array(result_type, dims), params, attrs)
    return OPCODES[opcode].evaluate(instr, operands, Evaluator())


def arr(type_name: str, *values) -> np.ndarray:
    """A 1-d array of `type_name` holding `values` (Python numbers)."""
    pt = T[type_name]
    if pt.is_integer:
        return np.array([int(v) for v in values], np.uint64 if pt.is_unsigned else np.int64).astype(pt.dtype)
    holder = np.complex128 if pt.is_complex else bool if pt.is_pred else np.float64
    with np.errstate(over="ignore"):  # values beyond a narrow type's range become inf on purpose
        return np.array(values, holder).astype(pt.dtype)


def f32(*values) -> np.ndarray:
    return np.array(values, dtype=np.float32)


def assert_same(got: np.ndarray, expected: np.ndarray) -> None:
    """Equal dtype, shape and values; NaN equals NaN, and the sign of zero counts."""
    got, expected = np.asarray(got), np.asarray(expected)
    assert isinstance(got, np.ndarray)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    if got.dtype.kind in "fcV" or got.dtype.name in ("bfloat16",) or "float" in got.dtype.name:
        g = got.astype(np.complex128 if got.dtype.kind == "c" else np.float64)
        e = expected.astype(g.dtype)
        for part_g, part_e in ((g.real, e.real), (g.imag, e.imag)) if g.dtype.kind == "c" else ((g, e),):
            both_nan = np.isnan(part_g) & np.isnan(part_e)
            same = (part_g == part_e) & (np.signbit(part_g) == np.signbit(part_e))
            assert np.all(both_nan | same), f"\ngot      {got}\nexpected {expected}"
    else:
        np.testing.assert_array_equal(got, expected)


# -- registry --------------------------------------------------------------------------------------


def test_every_elementwise_opcode_has_an_evaluation():
    names = [name for name, info in OPCODES.items() if info.is_elementwise] + ["bitcast-convert"]
    assert len(names) == 57
    assert [n for n in names if OPCODES[n].evaluate is None] == []
    assert all(OPCODES[n].evaluate.__doc__ for n in names)


# -- integers against a Python oracle ------------------------------------------------------------

INT_TYPES = ["s1", "s2", "s4", "s8", "s16", "s32", "s64", "u1", "u2", "u4", "u8", "u16", "u32", "u64"]


def _wrap(v: int, pt) -> int:
    v &= (1 << pt.bits) - 1
    return v - (1 << pt.bits) if pt.is_signed and v >= 1 << (pt.bits - 1) else v


def _bounds(pt) -> tuple[int, int]:
    return (-(1 << (pt.bits - 1)), (1 << (pt.bits - 1)) - 1) if pt.is_signed else (0, (1 << pt.bits) - 1)


def _divide(a, b, pt):
    lo, hi = _bounds(pt)
    if b == 0:
        return -1 if pt.is_signed else hi
    if a == lo and b == -1:
        return a
    q = abs(a) // abs(b)
    return _wrap(q if (a < 0) == (b < 0) else -q, pt)


def _remainder(a, b, pt):
    if b == 0:
        return a
    if pt.is_signed and a == _bounds(pt)[0] and b == -1:
        return 0
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def _shift(kind):
    def oracle(a, b, pt):
        amount = b & ((1 << pt.bits) - 1)
        as_signed = _wrap(a, T[f"s{pt.bits}"])
        if amount >= pt.bits:
            return _wrap(-1 if kind == "sra" and as_signed < 0 else 0, pt)
        if kind == "shl":
            return _wrap(a << amount, pt)
        if kind == "sra":
            return _wrap(as_signed >> amount, pt)
        return _wrap((a & ((1 << pt.bits) - 1)) >> amount, pt)

    return oracle


def _power(a, b, pt):
    """XLA:CPU's rule: the exponent's low 6 bits; negative as a signed number gives 1, ±1 or 0."""
    if b & (1 << (pt.bits - 1)):  # negative as a signed number
        return 1 if a == 1 else _wrap(-1 if b & 1 else 1, pt) if a == _wrap(-1, pt) else 0
    return _wrap(pow(a, b & 63, 1 << pt.bits), pt)


INT_BINARY_ORACLES = {
    "add": lambda a, b, pt: _wrap(a + b, pt),
    "subtract": lambda a, b, pt: _wrap(a - b, pt),
    "multiply": lambda a, b, pt: _wrap(a * b, pt),
    "divide": _divide,
    "remainder": _remainder,
    "maximum": lambda a, b, pt: max(a, b),
    "minimum": lambda a, b, pt: min(a, b),
    "and": lambda a, b, pt: _wrap(a & b, pt),
    "or": lambda a, b, pt: _wrap(a | b, pt),
    "xor": lambda a, b, pt: _wrap(a ^ b, pt),
    "shift-left": _shift("shl"),
    "shift-right-arithmetic": _shift("sra"),
    "shift-right-logical": _shift("srl"),
    "power": _power,
}

INT_UNARY_ORACLES = {
    "negate": lambda a, pt: _wrap(-a, pt),
    "abs": lambda a, pt: _wrap(abs(a), pt),
    "not": lambda a, pt: _wrap(~a, pt),
    "sign": lambda a, pt: (a > 0) - (a < 0),
    "popcnt": lambda a, pt: bin(a & ((1 << pt.bits) - 1)).count("1"),
    "count-leading-zeros": lambda a, pt: pt.bits - (a & ((1 << pt.bits) - 1)).bit_length(),
}


def _int_operands(pt, rng) -> tuple[np.ndarray, np.ndarray]:
    """All pairs for types of at most 8 bits; edge values crossed with each other plus random
    pairs for wider ones."""
    lo, hi = _bounds(pt)
    if pt.bits <= 8:
        values = np.arange(lo, hi + 1, dtype=object)
        a, b = np.meshgrid(values, values)
        return a.ravel(), b.ravel()
    edges = sorted(v for v in {lo, lo + 1, -1, -2, 0, 1, 2, 3, pt.bits - 1, pt.bits, pt.bits + 1, 63, 64, hi // 2,
                               hi - 1, hi} if lo <= v <= hi)
    a, b = np.meshgrid(np.array(edges, dtype=object), np.array(edges, dtype=object))
    randoms = [int(v) for v in rng.integers(lo, hi, size=600, endpoint=True, dtype=np.int64 if pt.is_signed
                                              else np.uint64)]
    small = [int(v) for v in rng.integers(-70 if pt.is_signed else 0, 70, size=600)]
    return (np.concatenate([a.ravel(), np.array(randoms[:300] + randoms[300:], dtype=object)]),
            np.concatenate([b.ravel(), np.array(randoms[300:] + small[:300], dtype=object)]))


def _typed(values, pt) -> np.ndarray:
    return arr(pt.name, *values)


def _wide(x: np.ndarray, pt) -> np.ndarray:
    return x.astype(np.uint64 if pt.is_unsigned else np.int64)


@pytest.mark.parametrize("type_name", INT_TYPES)
@pytest.mark.parametrize("opcode", list(INT_BINARY_ORACLES))
def test_integer_binary_ops_match_python_oracle(opcode, type_name):
    pt = T[type_name]
    a, b = _int_operands(pt, np.random.default_rng(len(opcode) * 100 + pt.bits))
    got = evaluate(opcode, type_name, _typed(a, pt), _typed(b, pt))
    expected = _typed([INT_BINARY_ORACLES[opcode](int(x), int(y), pt) for x, y in zip(a, b)], pt)
    bad = np.flatnonzero(_wide(got, pt) != _wide(expected, pt))
    assert got.dtype == pt.dtype
    assert bad.size == 0, [(a[i], b[i], got[i], expected[i]) for i in bad[:5]]


@pytest.mark.parametrize("type_name", INT_TYPES)
@pytest.mark.parametrize("opcode", list(INT_UNARY_ORACLES))
def test_integer_unary_ops_match_python_oracle(opcode, type_name):
    pt = T[type_name]
    a, _ = _int_operands(pt, np.random.default_rng(pt.bits))
    got = evaluate(opcode, type_name, _typed(a, pt))
    expected = _typed([INT_UNARY_ORACLES[opcode](int(x), pt) for x in a], pt)
    assert got.dtype == pt.dtype
    np.testing.assert_array_equal(_wide(got, pt), _wide(expected, pt))


@pytest.mark.parametrize("type_name", INT_TYPES)
@pytest.mark.parametrize("direction", ["EQ", "NE", "GE", "GT", "LE", "LT"])
def test_integer_compare_matches_python_oracle(direction, type_name):
    pt = T[type_name]
    a, b = _int_operands(pt, np.random.default_rng(7))
    op = {"EQ": "__eq__", "NE": "__ne__", "GE": "__ge__", "GT": "__gt__", "LE": "__le__", "LT": "__lt__"}[direction]
    got = evaluate("compare", "pred", _typed(a, pt), _typed(b, pt), direction=direction)
    assert_same(got, np.array([getattr(int(x), op)(int(y)) for x, y in zip(a, b)]))


@pytest.mark.parametrize("src", INT_TYPES)
@pytest.mark.parametrize("dst", INT_TYPES)
def test_int_to_int_convert_wraps(src, dst):
    s, d = T[src], T[dst]
    a, _ = _int_operands(s, np.random.default_rng(3))
    got = evaluate("convert", dst, _typed(a, s))
    np.testing.assert_array_equal(_wide(got, d), _wide(_typed([_wrap(int(v), d) for v in a], d), d))
    assert got.dtype == d.dtype


# -- integer edge cases, spelled out ---------------------------------------------------------------

INT_EDGES = [
    ("divide", "s32", [7, -7, 5, -2**31, 0], [2, 2, 0, -1, 0], [3, -3, -1, -2**31, -1]),
    ("divide", "u8", [7, 5, 0], [2, 0, 0], [3, 255, 255]),
    ("divide", "s4", [-8, 7, -8], [-1, 0, 3], [-8, -1, -2]),
    ("remainder", "s32", [7, -7, 7, -7, 5, -2**31], [2, 2, -2, -2, 0, -1], [1, -1, 1, -1, 5, 0]),
    ("remainder", "u16", [7, 9], [0, 4], [7, 1]),
    ("add", "s8", [127, -128], [1, -1], [-128, 127]),
    ("multiply", "u4", [15, 4], [15, 4], [1, 0]),
    ("shift-left", "s32", [1, 1, 1, 3], [31, 32, -1, 1], [-2**31, 0, 0, 6]),
    ("shift-right-arithmetic", "s32", [-8, -8, 8, -1], [1, 32, 40, -3], [-4, -1, 0, -1]),
    ("shift-right-logical", "s8", [-1, -1, -128], [1, 8, 7], [127, 0, 1]),
    ("shift-right-arithmetic", "u8", [0x80, 0x40], [1, 9], [0xC0, 0]),
    # power's expected values are XLA:CPU's (jax 0.10.2): the exponent's low 6 bits (3^64 = 1,
    # 2^65 = 2), and a negative exponent gives ±1 for base -1 by parity, also for unsigned types
    # read as signed (u8 3^128 = 0, 255^255 = 255).
    ("power", "s32", [2, -1, 1, 3, 0, 2, -2, 3, 2, -1], [10, -1, -5, -1, 0, 31, 3, 64, 65, -2],
     [1024, -1, 1, 0, 1, -2**31, -8, 1, 2, 1]),
    ("power", "u8", [3, 2, 3, 255, 255, 1], [5, 9, 128, 255, 254, 200], [243, 0, 0, 255, 1, 1]),
]


@pytest.mark.parametrize("opcode,type_name,a,b,expected", INT_EDGES)
def test_integer_edge_cases(opcode, type_name, a, b, expected):
    assert_same(evaluate(opcode, type_name, arr(type_name, *a), arr(type_name, *b)), arr(type_name, *expected))


def test_integer_unary_edge_cases():
    assert_same(evaluate("abs", "s32", arr("s32", -2**31, -5)), arr("s32", -2**31, 5))
    assert_same(evaluate("abs", "s4", arr("s4", -8, -7)), arr("s4", -8, 7))
    assert_same(evaluate("negate", "u8", arr("u8", 1, 0)), arr("u8", 255, 0))
    assert_same(evaluate("popcnt", "s8", arr("s8", -1, 0, 5)), arr("s8", 8, 0, 2))
    assert_same(evaluate("popcnt", "s4", arr("s4", -1, -8)), arr("s4", 4, 1))
    assert_same(evaluate("count-leading-zeros", "s32", arr("s32", 0, 1, -1, 2**30)), arr("s32", 32, 31, 0, 1))
    assert_same(evaluate("count-leading-zeros", "u4", arr("u4", 0, 1, 15)), arr("u4", 4, 3, 0))
    assert_same(evaluate("not", "s8", arr("s8", 0, -1, 5)), arr("s8", -1, 0, -6))
    assert_same(evaluate("not", "pred", np.array([True, False])), np.array([False, True]))
    assert_same(evaluate("sign", "s64", arr("s64", -2**63, 0, 9)), arr("s64", -1, 0, 1))


def test_pred_logic_and_compare():
    t, f = np.array([True, True, False, False]), np.array([True, False, True, False])
    assert_same(evaluate("and", "pred", t, f), np.array([True, False, False, False]))
    assert_same(evaluate("or", "pred", t, f), np.array([True, True, True, False]))
    assert_same(evaluate("xor", "pred", t, f), np.array([False, True, True, False]))
    assert_same(evaluate("maximum", "pred", t, f), np.array([True, True, True, False]))
    assert_same(evaluate("minimum", "pred", t, f), np.array([True, False, False, False]))
    assert_same(evaluate("power", "pred", t, f), np.array([True, True, False, True]))
    assert_same(evaluate("compare", "pred", t, f, direction="GT"), np.array([False, True, False, False]))


# -- floats ----------------------------------------------------------------------------------------

NAN, INF = float("nan"), float("inf")

FLOAT_UNARY_EDGES = [
    ("sign", [-0.0, 0.0, NAN, -3.0, INF], [-0.0, 0.0, NAN, -1.0, 1.0]),
    ("abs", [-0.0, -INF, -2.5], [0.0, INF, 2.5]),
    ("negate", [0.0, -0.0, INF], [-0.0, 0.0, -INF]),
    ("round-nearest-afz", [2.5, -2.5, 0.5, -0.4, 0.49999997, 1.5, INF, NAN, -0.0],
     [3.0, -3.0, 1.0, -0.0, 0.0, 2.0, INF, NAN, -0.0]),
    ("round-nearest-even", [2.5, 3.5, -0.5, -2.5, 0.49999997, 1e30], [2.0, 4.0, -0.0, -2.0, 0.0, 1e30]),
    ("ceil", [-0.5, 1.1, -INF], [-0.0, 2.0, -INF]),
    ("floor", [-0.5, 1.9, -0.0], [-1.0, 1.0, -0.0]),
    ("sqrt", [-0.0, 4.0, -1.0, INF], [-0.0, 2.0, NAN, INF]),
    ("rsqrt", [0.0, -0.0, 4.0, INF, -1.0], [INF, -INF, 0.5, 0.0, NAN]),
    ("cbrt", [-8.0, 27.0, -0.0, -INF], [-2.0, 3.0, -0.0, -INF]),
    ("exponential", [0.0, -INF, 1000.0, NAN], [1.0, 0.0, INF, NAN]),
    ("exponential-minus-one", [-0.0, -INF, 1e-300], [-0.0, -1.0, 1e-300]),
    ("log", [0.0, -1.0, 1.0, INF], [-INF, NAN, 0.0, INF]),
    ("log-plus-one", [-1.0, -2.0, -0.0, 1e-300], [-INF, NAN, -0.0, 1e-300]),
    ("logistic", [0.0, -INF, INF, -800.0], [0.5, 0.0, 1.0, 0.0]),
    ("tanh", [-0.0, INF, -INF, 20.0], [-0.0, 1.0, -1.0, 1.0]),
    ("sine", [-0.0, INF], [-0.0, NAN]),
    ("cosine", [0.0, -INF], [1.0, NAN]),
    ("tan", [-0.0, INF], [-0.0, NAN]),
    ("acos", [1.0, -1.0, 2.0], [0.0, math.pi, NAN]),
    ("asin", [-0.0, 1.0, -2.0], [-0.0, math.pi / 2, NAN]),
    ("acosh", [1.0, 0.5, INF], [0.0, NAN, INF]),
    ("asinh", [-0.0, -INF], [-0.0, -INF]),
    ("atanh", [1.0, -1.0, 2.0, -0.0], [INF, -INF, NAN, -0.0]),
    ("cosh", [0.0, -1000.0], [1.0, INF]),
    ("sinh", [-0.0, -1000.0], [-0.0, -INF]),
    ("erf", [0.0, -0.0, INF, -INF, NAN, 10.0, 0.5], [0.0, -0.0, 1.0, -1.0, NAN, 1.0, 0.5204998778130465]),
]


@pytest.mark.parametrize("type_name", ["f16", "bf16", "f32", "f64"])
@pytest.mark.parametrize("opcode,values,expected", FLOAT_UNARY_EDGES, ids=[e[0] for e in FLOAT_UNARY_EDGES])
def test_float_unary_edge_cases(opcode, values, expected, type_name):
    x = arr(type_name, *values)
    expected = arr(type_name, *expected)
    exact = (x.astype(np.float64) == np.array(values)) | np.isnan(np.array(values))
    x, expected = x[exact], expected[exact]  # keep inputs the type holds exactly
    assert_same(evaluate(opcode, type_name, x), expected)


def test_is_finite():
    assert_same(evaluate("is-finite", "pred", f32(1, INF, -INF, NAN, -0.0)), np.array([True, False, False, False, True]))
    assert_same(evaluate("is-finite", "pred", arr("bf16", 1, INF, NAN)), np.array([True, False, False]))


FLOAT_BINARY_EDGES = [
    ("maximum", [NAN, 1.0, -0.0, 0.0, 2.0], [1.0, NAN, 0.0, -0.0, -INF], [NAN, NAN, -0.0, 0.0, 2.0]),
    ("minimum", [NAN, 1.0, -0.0, 0.0, 2.0], [1.0, NAN, 0.0, -0.0, -INF], [NAN, NAN, -0.0, 0.0, -INF]),
    ("divide", [1.0, -1.0, 0.0, 1.0], [0.0, 0.0, 0.0, -0.0], [INF, -INF, NAN, -INF]),
    ("remainder", [7.5, -7.5, 7.5, 5.0, INF, 3.0, -0.0], [2.0, 2.0, -2.0, 0.0, 2.0, INF, 1.0],
     [1.5, -1.5, 1.5, NAN, NAN, 3.0, -0.0]),
    ("power", [1.0, NAN, 0.0, -8.0, 2.0, -1.0, 0.0], [NAN, 0.0, -1.0, 1 / 3, 10.0, INF, 0.0],
     [1.0, 1.0, INF, NAN, 1024.0, 1.0, 1.0]),
    ("atan2", [0.0, -0.0, 0.0, 1.0, INF], [-0.0, -0.0, 0.0, 0.0, INF], [math.pi, -math.pi, 0.0, math.pi / 2, math.pi / 4]),
    ("add", [INF, 1.0, -0.0], [-INF, 2.0, 0.0], [NAN, 3.0, 0.0]),
    ("multiply", [INF, -2.0], [0.0, 0.0], [NAN, -0.0]),
]


@pytest.mark.parametrize("type_name", ["f16", "bf16", "f32", "f64"])
@pytest.mark.parametrize("opcode,a,b,expected", FLOAT_BINARY_EDGES, ids=[e[0] for e in FLOAT_BINARY_EDGES])
def test_float_binary_edge_cases(opcode, a, b, expected, type_name):
    assert_same(evaluate(opcode, type_name, arr(type_name, *a), arr(type_name, *b)), arr(type_name, *expected))


def test_narrow_floats_compute_in_f32_and_round_once():
    # 1 + 2^-8 is a tie in bf16 and rounds to even (1.0); 1 + 2^-8 + 2^-9 rounds up.
    one, half_ulp, quarter_ulp = (arr("bf16", v) for v in (1.0, 2**-8, 2**-9))
    assert_same(evaluate("add", "bf16", one, half_ulp), arr("bf16", 1.0))
    assert_same(evaluate("add", "bf16", evaluate("add", "bf16", one, quarter_ulp), half_ulp), arr("bf16", 1.0))
    x = arr("f16", 1.0 + 2**-10)
    assert_same(evaluate("multiply", "f16", x, x), arr("f16", 1.0 + 2**-9))  # exact 1+2^-9+2^-20 rounds down
    assert_same(evaluate("add", "f8e4m3fn", arr("f8e4m3fn", 448.0), arr("f8e4m3fn", 448.0)), arr("f8e4m3fn", NAN))
    assert_same(evaluate("add", "f8e5m2", arr("f8e5m2", 57344.0), arr("f8e5m2", 57344.0)), arr("f8e5m2", INF))


def test_complex_ops():
    z = np.array([3 + 4j, 0j, -1 + 0j], np.complex64)
    assert_same(evaluate("abs", "f32", z), f32(5, 0, 1))
    assert_same(evaluate("real", "f32", z), f32(3, 0, -1))
    assert_same(evaluate("imag", "f32", z), f32(4, 0, 0))
    assert_same(evaluate("sign", "c64", z), np.array([0.6 + 0.8j, 0, -1], np.complex64))
    assert_same(evaluate("complex", "c64", f32(INF, 1), f32(0, NAN)), np.array([complex(INF, 0), complex(1, NAN)],
                                                                                np.complex64))
    assert_same(evaluate("power", "c64", z, np.array([0, 2, 1 + 1j], np.complex64))[:2],
                np.array([1, 0], np.complex64))
    # 0^y: 0 for a real y > 0, else NaN + NaN i (XLA:CPU's; std::pow gives 0 for any Re(y) > 0)
    zero_base = evaluate("power", "c64", np.zeros(5, np.complex64), np.array([2, 0.5 + 0.5j, -1, 2j, 0], np.complex64))
    assert_same(zero_base, np.array([0, complex(NAN, NAN), complex(NAN, NAN), complex(NAN, NAN), 1], np.complex64))
    assert_same(evaluate("compare", "pred", z, z, direction="EQ"), np.array([True, True, True]))
    tiny = np.array([1e-10 + 1e-10j], np.complex128)
    np.testing.assert_allclose(evaluate("exponential-minus-one", "c128", tiny), tiny + tiny**2 / 2, rtol=1e-15)
    np.testing.assert_allclose(evaluate("log-plus-one", "c128", tiny), tiny - tiny**2 / 2, rtol=1e-15)
    assert_same(evaluate("real", "f32", f32(1.5)), f32(1.5))
    assert_same(evaluate("imag", "f64", np.array([1.5])), np.array([0.0]))
    with pytest.raises(UnsupportedError):
        evaluate("remainder", "c64", z, z)
    with pytest.raises(UnsupportedError):
        evaluate("compare", "pred", z, z, direction="LT")


# -- compare ---------------------------------------------------------------------------------------


def test_float_compare_partial_and_total_order():
    a = f32(NAN, NAN, -0.0, 1.0, NAN)
    b = f32(NAN, 1.0, 0.0, 1.0, -NAN)
    assert_same(evaluate("compare", "pred", a, b, direction="EQ"), np.array([False, False, True, True, False]))
    assert_same(evaluate("compare", "pred", a, b, direction="NE"), np.array([True, True, False, False, True]))
    assert_same(evaluate("compare", "pred", a, b, direction="LT"), np.array([False, False, False, False, False]))
    ordered = f32(-NAN, -INF, -1.0, -1e-45, -0.0, 0.0, 1e-45, 1.0, INF, NAN)
    ordered[0] = -abs(ordered[0])  # make sure the first NaN has its sign bit set
    for type_name in ("f16", "bf16", "f32", "f64", "f8e5m2"):
        x = ordered.astype(T[type_name].dtype)
        keep = np.r_[True, np.diff(x.astype(np.float64)) != 0] | np.isnan(x.astype(np.float64))
        x = x[keep]  # values lost to the narrow type's range collapse onto their neighbours
        lhs, rhs = np.meshgrid(x, x, indexing="ij")
        index = np.arange(len(x))
        expected = index[:, None] < index[None, :]
        got = evaluate("compare", "pred", lhs, rhs, direction="LT", type="TOTALORDER")
        assert_same(got, expected)
        got = evaluate("compare", "pred", lhs, rhs, direction="EQ", type="TOTALORDER")
        assert_same(got, index[:, None] == index[None, :])


def test_unsigned_and_signed_compare_by_element_type():
    assert_same(evaluate("compare", "pred", arr("u8", 200), arr("u8", 100), direction="GT"), np.array([True]))
    assert_same(evaluate("compare", "pred", arr("s8", -56), arr("s8", 100), direction="GT"), np.array([False]))


# -- convert ---------------------------------------------------------------------------------------


def test_float_to_int_saturates_and_maps_nan_to_zero():
    x = f32(3e9, -3e9, NAN, INF, -INF, -1.7, 1.7, 2147483520.0, 2147483648.0)
    assert_same(evaluate("convert", "s32", x), arr("s32", 2**31 - 1, -2**31, 0, 2**31 - 1, -2**31, -1, 1,
                                                   2147483520, 2**31 - 1))
    assert_same(evaluate("convert", "u8", f32(-0.7, -5, 300, 255.9, NAN)), arr("u8", 0, 0, 255, 255, 0))
    assert_same(evaluate("convert", "s4", f32(9.5, -9.5, 7.9)), arr("s4", 7, -8, 7))
    assert_same(evaluate("convert", "u64", np.array([1.8446744073709552e19, 1e19, -1.0])),
                arr("u64", 2**64 - 1, 10**19, 0))
    assert_same(evaluate("convert", "s64", np.array([9.2233720368547758e18, -9.3e18])), arr("s64", 2**63 - 1, -2**63))


def test_convert_to_and_from_pred():
    assert_same(evaluate("convert", "pred", f32(NAN, 0.0, -0.0, 0.5)), np.array([True, False, False, True]))
    assert_same(evaluate("convert", "pred", arr("s4", -8, 0)), np.array([True, False]))
    assert_same(evaluate("convert", "pred", np.array([0j, 1j])), np.array([False, True]))
    for type_name in ("s4", "u8", "s64", "bf16", "f16", "f32", "f8e4m3fn", "c64"):
        assert_same(evaluate("convert", type_name, np.array([True, False])), arr(type_name, 1, 0))


def test_float_to_float_rounding():
    # f64 reaches bf16/f16 through f32 (XLA does too): 1 + 2^-8 + 2^-30 rounds to 1 + 2^-8 in f32,
    # a tie that bf16 breaks to even.
    assert_same(evaluate("convert", "bf16", np.array([1 + 2**-8 + 2**-30])), arr("bf16", 1.0))
    assert_same(evaluate("convert", "f16", np.array([1 + 2**-11 + 2**-30])), arr("f16", 1.0))
    assert_same(evaluate("convert", "bf16", f32(1 + 2**-8 + 2**-9)), arr("bf16", 1 + 2**-7))
    assert_same(evaluate("convert", "f16", f32(1e6, -1e6)), arr("f16", INF, -INF))
    assert_same(evaluate("convert", "f8e4m3fn", f32(1000.0, 448.0)), arr("f8e4m3fn", NAN, 448.0))
    assert_same(evaluate("convert", "f8e4m3fnuz", f32(1000.0)), arr("f8e4m3fnuz", NAN))
    assert_same(evaluate("convert", "f8e5m2", f32(1e6)), arr("f8e5m2", INF))
    assert_same(evaluate("convert", "f64", arr("bf16", 1.5)), np.array([1.5]))
    assert_same(evaluate("convert", "f16", arr("f8e5m2", 3.0)), arr("f16", 3.0))


def test_int_to_float_rounds_to_nearest_even():
    assert_same(evaluate("convert", "f32", arr("s32", 2**24 + 1, 2**24 + 3)), f32(2**24, 2**24 + 4))
    assert_same(evaluate("convert", "f32", arr("u64", 2**64 - 1)), f32(2.0**64))
    # Through f32: 2^24 + 2^16 + 1 → 2^24 + 2^16 (f32), a tie that bf16 breaks to even: 2^24.
    assert_same(evaluate("convert", "bf16", arr("s32", 2**24 + 2**16 + 1)), arr("bf16", 2.0**24))
    assert_same(evaluate("convert", "f16", arr("s32", 70000)), arr("f16", INF))
    assert_same(evaluate("convert", "f32", arr("u4", 15)), f32(15))


def test_complex_conversions():
    assert_same(evaluate("convert", "c64", f32(1.5, NAN)), np.array([1.5 + 0j, complex(NAN, 0)], np.complex64))
    assert_same(evaluate("convert", "c128", arr("s8", -3)), np.array([-3 + 0j]))
    assert_same(evaluate("convert", "c64", np.array([1 + 2j])), np.array([1 + 2j], np.complex64))
    assert_same(evaluate("convert", "f32", np.array([1.5 + 2j], np.complex64)), f32(1.5))
    assert_same(evaluate("convert", "s32", np.array([-7.9 + 2j])), arr("s32", -7))


# -- bitcast-convert -------------------------------------------------------------------------------


def test_bitcast_convert_same_width():
    assert_same(evaluate("bitcast-convert", "u32", f32(1.0, -0.0)), arr("u32", 0x3F800000, 0x80000000))
    assert_same(evaluate("bitcast-convert", "f16", arr("s16", 0x7C00)), arr("f16", INF))
    assert_same(evaluate("bitcast-convert", "s4", arr("u4", 15, 8)), arr("s4", -1, -8))
    assert_same(evaluate("bitcast-convert", "f8e4m3fn", arr("u8", 0x38)), arr("f8e4m3fn", 1.0))


def test_bitcast_convert_changes_width_along_a_minor_dimension():
    got = evaluate("bitcast-convert", "u8", f32(1.0, 2.0), dims=(2, 4))
    assert_same(got, np.array([[0, 0, 0x80, 0x3F], [0, 0, 0, 0x40]], np.uint8))
    assert_same(evaluate("bitcast-convert", "f32", got, dims=(2,)), f32(1.0, 2.0))
    wide = evaluate("bitcast-convert", "u16", np.array([0x0102030405060708], np.uint64), dims=(1, 4))
    assert_same(wide, np.array([[0x0708, 0x0506, 0x0304, 0x0102]], np.uint16))
    nibbles = evaluate("bitcast-convert", "u4", arr("u8", 0x1F, 0xA2), dims=(2, 2))
    assert_same(nibbles, np.array([[15, 1], [2, 10]]).astype(ml_dtypes.uint4))
    assert_same(evaluate("bitcast-convert", "u8", nibbles, dims=(2,)), arr("u8", 0x1F, 0xA2))
    assert_same(evaluate("bitcast-convert", "s8", arr("s4", -1, 7), dims=()), arr("s8", 0x7F)[0])
    c = evaluate("bitcast-convert", "f32", np.array([1.5 - 2j], np.complex64), dims=(1, 2))
    assert_same(c, f32(1.5, -2.0).reshape(1, 2))
    with pytest.raises(UnsupportedError):
        evaluate("bitcast-convert", "f32", arr("u8", 1, 2, 3), dims=())


# -- reduce-precision ------------------------------------------------------------------------------


def test_reduce_precision_f32_to_bf16_and_f16_formats():
    rng = np.random.default_rng(11)
    x = np.concatenate([f32(1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-20, 3.39e38, -1e-39, -INF, 65520.0, 6e-5,
                            2**-14 * (1 - 2**-12)),
                        (rng.standard_normal(2000) * np.exp(rng.uniform(-40, 40, 2000))).astype(np.float32)])
    # (8, 7) is bf16 exactly, subnormals and overflow included.
    as_bf16 = evaluate("reduce-precision", "f32", x, exponent_bits=8, mantissa_bits=7)
    assert_same(as_bf16, x.astype(ml_dtypes.bfloat16).astype(np.float32))
    # (5, 10) is f16 with its subnormals flushed to (signed) zero.
    as_f16 = evaluate("reduce-precision", "f32", x, exponent_bits=5, mantissa_bits=10)
    with np.errstate(over="ignore"):
        expected = x.astype(np.float16).astype(np.float32)
    expected = np.where(np.abs(expected) < 2**-14, np.copysign(np.float32(0), x), expected)
    assert_same(as_f16, expected)
    assert_same(as_f16[:9], f32(1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8, INF, -0.0, -INF, INF, 0.0, 2**-14))
    assert_same(as_bf16[:3], f32(1.0, 1 + 2**-6, 1 + 2**-7))


def test_reduce_precision_nan_and_narrow_types():
    # NaN keeps its bits also with mantissa_bits=0 (XLA:CPU's result, jax 0.10.2; rounding them would give inf).
    nans = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0x40400000], np.uint32).view(np.float32)
    got = evaluate("reduce-precision", "f32", nans, exponent_bits=8, mantissa_bits=0)
    np.testing.assert_array_equal(got.view(np.uint32), [0x7FC00000, 0xFFC00000, 0x7F800001, 0x40000000])
    assert_same(evaluate("reduce-precision", "f64", np.array([NAN, 1 + 2**-30]), exponent_bits=11, mantissa_bits=23),
                np.array([NAN, 1.0]))
    # f16 keeps its own subnormals with exponent_bits=5; a shorter mantissa rounds their bits.
    sub = arr("f16", 6e-8, 1e-5)
    assert_same(evaluate("reduce-precision", "f16", sub, exponent_bits=5, mantissa_bits=10), sub)
    assert_same(evaluate("reduce-precision", "f16", sub, exponent_bits=5, mantissa_bits=3), arr("f16", 0.0, 2**-17))
    assert_same(evaluate("reduce-precision", "bf16", arr("bf16", 3.0, 1e30), exponent_bits=5, mantissa_bits=0),
                arr("bf16", 2.0, INF))  # 3 = 1.1b·2^1: a tie, to the even exponent


# -- stochastic-convert ----------------------------------------------------------------------------


def test_stochastic_convert():
    x = f32(1.5, 1.5, -1.5, -1.5, 2.25, 2.25, INF, -INF, NAN, 3e9, -0.0, 7.0)
    r = arr("u32", 2**31 - 1, 2**31, 0, 2**31, 2**30 - 1, 2**30, 0, 0, 0, 0, 0, 2**32 - 1)
    assert_same(evaluate("stochastic-convert", "s32", x, r),
                arr("s32", 2, 1, -2, -1, 3, 2, 2**31 - 1, -2**31, 0, 2**31 - 1, 0, 7))
    assert_same(evaluate("stochastic-convert", "s8", arr("bf16", 127.5, -200.0), arr("u16", 0, 0)),
                arr("s8", 127, -128))
    assert_same(evaluate("stochastic-convert", "s16", arr("f16", 0.5), arr("u16", 2**15 - 1)), arr("s16", 1))


# -- select, clamp ---------------------------------------------------------------------------------


def test_select():
    assert_same(evaluate("select", "f32", np.array([True, False]), f32(1, 2), f32(3, 4)), f32(1, 4))
    assert_same(evaluate("select", "s4", np.array(False), arr("s4", 1, 2), arr("s4", 3, 4)), arr("s4", 3, 4))
    assert_same(evaluate("select", "bf16", np.array(True), arr("bf16", -0.0), arr("bf16", 0.0)), arr("bf16", -0.0))


def test_clamp():
    # -0 < +0 as in XLA:CPU (jax 0.10.2): clamp(+0, -0, 1) = +0, clamp(-1, -0, +0) = -0.
    assert_same(evaluate("clamp", "f32", f32(0)[0], f32(-1, 0.5, 2, NAN, -0.0), f32(1)[0]), f32(0, 0.5, 1, NAN, 0.0))
    assert_same(evaluate("clamp", "f32", f32(-1)[0], f32(-0.0, 0.0), f32(0)[0]), f32(-0.0, 0.0))
    assert_same(evaluate("clamp", "f32", f32(-1)[0], f32(-0.0, 0.0), f32(-0.0)[0]), f32(-0.0, -0.0))
    assert_same(evaluate("clamp", "f32", f32(NAN)[0], f32(0.5), f32(NAN)[0]), f32(NAN))
    assert_same(evaluate("clamp", "f32", f32(2)[0], f32(0.5, 5), f32(1)[0]), f32(1, 1))  # min > max: max
    assert_same(evaluate("clamp", "s32", arr("s32", -1, 0, 5), arr("s32", -5, 3, 9), arr("s32", 1, 1, 7)),
                arr("s32", -1, 1, 7))
    assert_same(evaluate("clamp", "u4", arr("u4", 2)[0], arr("u4", 0, 15), arr("u4", 9)[0]), arr("u4", 2, 9))
    assert_same(evaluate("clamp", "bf16", arr("bf16", 0)[0], arr("bf16", -3, 3), arr("bf16", 1)[0]), arr("bf16", 0, 1))


# -- shapes: scalars and whole arrays in sub-computations --------------------------------------------


def test_scalars_give_zero_dimensional_arrays():
    got = evaluate("add", "s32", np.int32(2**31 - 1), np.int32(1))
    assert_same(got, np.array(-2**31, np.int32))
    assert_same(evaluate("exponential", "f32", np.float32(0)), np.array(1.0, np.float32))
    assert_same(evaluate("compare", "pred", np.float32(1), np.float32(2), direction="LT"), np.array(True))


def test_arrays_evaluated_against_a_scalar_instruction_shape():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert_same(evaluate("multiply", "f32", a, a, dims=()), a * a)
    assert_same(evaluate("convert", "s8", a, dims=()), a.astype(np.int8))
    assert_same(evaluate("select", "f32", a > 5, a, -a, dims=()), np.where(a > 5, a, -a))


def test_copy_is_a_new_array():
    a = f32(1, 2)
    got = evaluate("copy", "f32", a)
    assert_same(got, a)
    assert got is not a and not np.shares_memory(got, a)


def test_erf_accuracy_against_math_erf():
    x = np.concatenate([np.linspace(-6, 6, 20001), np.random.default_rng(0).standard_normal(5000) * 2])
    got = evaluate("erf", "f64", x)
    expected = np.array([math.erf(v) for v in x])
    assert ulp_distance(got, expected, T["f64"]).max() <= 2
    x32 = x.astype(np.float32)
    assert_same(evaluate("erf", "f32", x32), np.array([math.erf(v) for v in x32.astype(np.float64)], np.float32))


def test_unsupported_types_raise():
    with pytest.raises(UnsupportedError):
        evaluate("exponential", "s32", arr("s32", 1))
    with pytest.raises(UnsupportedError):
        evaluate("and", "f32", f32(1), f32(1))
    with pytest.raises(UnsupportedError):
        evaluate("popcnt", "f32", f32(1))


def test_no_numpy_warnings(recwarn):
    evaluate("divide", "f32", f32(1, 0, -1), f32(0, 0, 0))
    evaluate("log", "f64", np.array([-1.0, 0.0]))
    evaluate("convert", "f8e4m3fn", f32(1e9))
    evaluate("convert", "s32", f32(NAN, 1e20))
    evaluate("power", "s8", arr("s8", 100), arr("s8", 100))
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


# -- agreement with jax.lax (XLA:CPU) ----------------------------------------------------------------


def ulp_distance(a: np.ndarray, b: np.ndarray, pt) -> np.ndarray:
    """Distance in units in the last place of type `pt` (NaN vs NaN is 0, NaN vs number is huge)."""
    from hlocc.evaluator.numerics import total_order_key

    a, b = np.asarray(a).astype(pt.dtype), np.asarray(b).astype(pt.dtype)
    fa, fb = a.astype(np.float64), b.astype(np.float64)
    ka, kb = total_order_key(a, pt), total_order_key(b, pt)
    # +0 and -0 are one key apart but equal values.
    ka = np.where(fa == 0, 0, np.where(ka < 0, ka + 1, ka))
    kb = np.where(fb == 0, 0, np.where(kb < 0, kb + 1, kb))
    same_side = (ka >= 0) == (kb >= 0)  # int64 differences overflow only across zero
    distance = np.where(same_side, np.abs(np.where(same_side, ka - kb, 0)).astype(np.float64),
                        np.abs(ka.astype(np.float64)) + np.abs(kb.astype(np.float64)))
    both_nan = np.isnan(fa) & np.isnan(fb)
    one_nan = np.isnan(fa) ^ np.isnan(fb)
    return np.where(both_nan, 0, np.where(one_nan, np.inf, distance))


FLOAT_TYPES = ["f16", "bf16", "f32", "f64"]
SPECIALS = [0.0, -0.0, INF, -INF, NAN, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 1e-30, -3e38, 65504.0, 1e-7, 6e-8]


def random_floats(pt, rng, n=512) -> np.ndarray:
    scale = {"f16": 8.0, "bf16": 8.0}.get(pt.name, 30.0)
    values = np.concatenate([SPECIALS, rng.standard_normal(n // 2) * scale, rng.uniform(-1.5, 1.5, n // 4),
                             np.exp(rng.uniform(-30, 30, n // 4)) * rng.choice([-1, 1], n // 4)])
    with np.errstate(over="ignore"):
        return values.astype(np.float32).astype(pt.dtype) if pt.bits < 64 else values


def random_ints(pt, rng, n=512) -> np.ndarray:
    lo, hi = _bounds(pt)
    edges = [v for v in (lo, lo + 1, -1, 0, 1, hi - 1, hi) if lo <= v <= hi]
    values = rng.integers(lo, hi, size=n, endpoint=True, dtype=np.int64 if pt.is_signed else np.uint64)
    return np.concatenate([np.array(edges, dtype=values.dtype), values]).astype(pt.dtype)


# Largest distance, in ulps of the result type, from jax.lax on XLA:CPU: (f32, f64). The
# evaluator is within 1 ulp of the correctly rounded result (f32 and narrower compute in f64; f64
# uses the C library, checked against mpmath below); the rest is XLA:CPU's own error, which is
# large where it rewrites a function (cosh/sinh through exp(x - log 2), log1p/atanh in f64).
# 0 means bit-exact. f16/bf16 are compared with jax's f32 result rounded to the type, within 1 ulp.
JAX_ULPS: dict[str, tuple[int, int]] = {
    "exponential": (1, 1), "exponential-minus-one": (4, 3), "log": (1, 1), "log-plus-one": (2, 128),
    "logistic": (2, 4), "sqrt": (0, 0), "rsqrt": (1, 2), "cbrt": (1, 3), "sine": (1, 1), "cosine": (1, 1),
    "tan": (1, 1), "tanh": (4, 8), "acos": (1, 1), "asin": (2, 1), "acosh": (3, 3), "asinh": (2, 2),
    "atanh": (2, 128), "cosh": (24, 500), "sinh": (24, 500), "erf": (3, 2), "ceil": (0, 0), "floor": (0, 0),
    "round-nearest-afz": (0, 0), "round-nearest-even": (0, 0), "abs": (0, 0), "negate": (0, 0), "sign": (0, 0),
}
JAX_BINARY_ULPS: dict[str, tuple[int, int]] = {
    "add": (0, 0), "subtract": (0, 0), "multiply": (0, 0), "divide": (0, 0), "remainder": (0, 0),
    "maximum": (0, 0), "minimum": (0, 0), "power": (1, 1), "atan2": (1, 1),
}


@pytest.fixture(scope="module")
def jax_modules():
    jax = pytest.importorskip("jax")
    from jax import lax

    unary = {
        "exponential": lax.exp, "exponential-minus-one": lax.expm1, "log": lax.log, "log-plus-one": lax.log1p,
        "logistic": lax.logistic, "sqrt": lax.sqrt, "rsqrt": lax.rsqrt, "cbrt": lax.cbrt, "sine": lax.sin,
        "cosine": lax.cos, "tan": lax.tan, "tanh": lax.tanh, "acos": lax.acos, "asin": lax.asin,
        "acosh": lax.acosh, "asinh": lax.asinh, "atanh": lax.atanh, "cosh": lax.cosh, "sinh": lax.sinh,
        "erf": lax.erf, "ceil": lax.ceil, "floor": lax.floor,
        "round-nearest-afz": lambda x: lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO),
        "round-nearest-even": lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN),
        "abs": lax.abs, "negate": lax.neg, "sign": lax.sign, "not": lax.bitwise_not,
        "popcnt": lax.population_count, "count-leading-zeros": lax.clz, "is-finite": lax.is_finite,
    }
    binary = {
        "add": lax.add, "subtract": lax.sub, "multiply": lax.mul, "divide": lax.div, "remainder": lax.rem,
        "maximum": lax.max, "minimum": lax.min, "power": lax.pow, "atan2": lax.atan2, "and": lax.bitwise_and,
        "or": lax.bitwise_or, "xor": lax.bitwise_xor, "shift-left": lax.shift_left,
        "shift-right-arithmetic": lax.shift_right_arithmetic, "shift-right-logical": lax.shift_right_logical,
    }
    return jax, lax, unary, binary


def _jax_run(jax, fn, *args):
    """fn(*args) under jax.jit on the CPU (one compilation), as numpy; a tuple result gives a tuple."""
    with jax.enable_x64(True):
        result = jax.jit(fn)(*args)
    return tuple(np.asarray(r) for r in result) if isinstance(result, tuple) else np.asarray(result)


def _all_of(fns):
    """One function computing every fn of `fns` on the same arguments: one jit compilation for all."""
    return lambda *args: tuple(fn(*args) for fn in fns)


def _jax_float_run(jax, fn, type_name, *args):
    """jax's result for float `args`: f16/bf16 computed in f32 and rounded to the type (the
    evaluator's rule), other types in their own precision."""
    pt = T[type_name]
    if pt.bits >= 32:
        return _jax_run(jax, fn, *args)
    with np.errstate(over="ignore"):
        return tuple(r.astype(pt.dtype) for r in _jax_run(jax, fn, *(a.astype(np.float32) for a in args)))


def _flush_denormals(x: np.ndarray, pt) -> np.ndarray:
    """x with results below the smallest normal f32 (f64 for f64) set to signed zero: XLA:CPU runs
    with denormals flushed to zero, the evaluator (like HloEvaluator) keeps them."""
    wide = x.astype(np.float64)
    tiny = np.finfo(np.float64 if pt.bits == 64 else np.float32).tiny
    return np.where(np.abs(wide) < tiny, np.copysign(0.0, wide), wide).astype(x.dtype)


def _check_float_result(opcode, type_name, got, expected, ulps, inputs):
    pt = T[type_name]
    if type_name in ("f32", "bf16", "f64"):
        got, expected = _flush_denormals(got, pt), _flush_denormals(expected, pt)
    distance = ulp_distance(got, expected, pt)
    worst = int(np.argmax(distance))
    assert distance.max() <= ulps, (f"{opcode} {type_name}: {distance.max()} ulp at input "
                                    f"{[np.asarray(i).ravel()[worst] for i in inputs]}: "
                                    f"got {got.ravel()[worst]}, jax {expected.ravel()[worst]}")


def _tolerance(table: dict[str, tuple[int, int]], opcode: str, type_name: str) -> int:
    f32_ulps, f64_ulps = table[opcode]
    return {"f32": f32_ulps, "f64": f64_ulps}.get(type_name, min(f32_ulps, 1))


@pytest.mark.parametrize("type_name", FLOAT_TYPES)
def test_float_unary_ops_agree_with_jax(jax_modules, type_name):
    jax, lax, unary, _ = jax_modules
    x = random_floats(T[type_name], np.random.default_rng(1))
    results = _jax_float_run(jax, _all_of([unary[op] for op in JAX_ULPS]), type_name, x)
    for opcode, expected in zip(JAX_ULPS, results, strict=True):
        got = evaluate(opcode, type_name, x)
        assert got.dtype == expected.dtype, opcode
        _check_float_result(opcode, type_name, got, expected, _tolerance(JAX_ULPS, opcode, type_name), [x])


@pytest.mark.parametrize("type_name", FLOAT_TYPES)
def test_float_binary_ops_agree_with_jax(jax_modules, type_name):
    jax, lax, _, binary = jax_modules
    pt = T[type_name]
    rng = np.random.default_rng(2)
    a = random_floats(pt, rng)
    b = rng.permutation(random_floats(pt, rng))
    results = _jax_float_run(jax, _all_of([binary[op] for op in JAX_BINARY_ULPS]), type_name, a, b)
    for opcode, expected in zip(JAX_BINARY_ULPS, results, strict=True):
        got = evaluate(opcode, type_name, a, b)
        _check_float_result(opcode, type_name, got, expected, _tolerance(JAX_BINARY_ULPS, opcode, type_name),
                            [a, b])


@pytest.mark.parametrize("opcode", [op for op, (f32_ulps, _) in JAX_ULPS.items() if f32_ulps > 0])
def test_f64_functions_within_one_ulp_of_mpmath(opcode):
    mpmath = pytest.importorskip("mpmath")
    functions = {
        "exponential": mpmath.exp, "exponential-minus-one": mpmath.expm1, "log": mpmath.log,
        "log-plus-one": lambda v: mpmath.log(1 + v), "logistic": lambda v: 1 / (1 + mpmath.exp(-v)),
        "rsqrt": lambda v: 1 / mpmath.sqrt(v), "cbrt": mpmath.cbrt, "sine": mpmath.sin, "cosine": mpmath.cos,
        "tan": mpmath.tan, "tanh": mpmath.tanh, "acos": mpmath.acos, "asin": mpmath.asin, "acosh": mpmath.acosh,
        "asinh": mpmath.asinh, "atanh": mpmath.atanh, "cosh": mpmath.cosh, "sinh": mpmath.sinh, "erf": mpmath.erf,
    }
    rng = np.random.default_rng(12)
    x = np.concatenate([rng.uniform(-1, 1, 150), rng.standard_normal(150) * 20, rng.uniform(1, 3, 50)])
    with mpmath.workprec(120):
        domain = [v for v in x if mpmath.im(functions[opcode](mpmath.mpf(float(v)))) == 0]
        x = np.array(domain)
        expected = np.array([float(functions[opcode](mpmath.mpf(float(v)))) for v in x])
    got = evaluate(opcode, "f64", x)
    assert ulp_distance(got, expected, T["f64"]).max() <= (2 if opcode == "erf" else 1)


JAX_INT_UNARY = ["abs", "negate", "sign", "not", "popcnt", "count-leading-zeros"]
JAX_INT_BINARY = ["add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "and", "or", "xor",
                  "shift-left", "shift-right-arithmetic", "shift-right-logical"]


@pytest.mark.parametrize("type_name", ["s4", "s8", "s16", "s32", "s64", "u4", "u8", "u16", "u32", "u64"])
def test_integer_ops_agree_with_jax(jax_modules, type_name):
    jax, lax, unary, binary = jax_modules
    pt = T[type_name]
    rng = np.random.default_rng(3)
    a, b = random_ints(pt, rng), random_ints(pt, rng)[::-1].copy()
    shift_amounts = rng.integers(0, pt.bits + 3, a.size).astype(pt.dtype)
    checked = []
    for opcode in JAX_INT_BINARY + JAX_INT_UNARY:
        if opcode in ("abs", "sign") and pt.is_unsigned:
            continue
        if opcode == "popcnt" and pt.bits < 8:
            continue  # XLA:CPU counts the sign-extended byte of s4 (popcnt(s4 -8) = 5); we count 4 bits
        fn = (unary if opcode in JAX_INT_UNARY else binary)[opcode]
        try:
            jax.eval_shape(fn, *((a,) if opcode in JAX_INT_UNARY else (a, b)))
        except TypeError:
            assert pt.bits < 8  # jax supports only basic arithmetic on int4
            continue
        checked.append(opcode)
    operands = {op: [a] if op in JAX_INT_UNARY else [a, shift_amounts if op.startswith("shift") else b]
                for op in checked}

    def every_op(x, y, amounts):
        chosen = {id(a): x, id(b): y, id(shift_amounts): amounts}  # the traced stand-ins of the arrays
        return tuple((unary if op in JAX_INT_UNARY else binary)[op](*(chosen[id(v)] for v in operands[op]))
                     for op in checked)

    results = _jax_run(jax, every_op, a, b, shift_amounts)
    for opcode, expected in zip(checked, results, strict=True):
        np.testing.assert_array_equal(evaluate(opcode, type_name, *operands[opcode]), expected, err_msg=opcode)
    assert len(checked) >= 8



@pytest.mark.parametrize("type_name", FLOAT_TYPES + ["s8", "s32", "u8", "u64", "s64"])
def test_compare_agrees_with_jax(jax_modules, type_name):
    jax, lax, _, _ = jax_modules
    pt = T[type_name]
    rng = np.random.default_rng(4)
    if pt.is_float:
        a = random_floats(pt, rng)
        b = np.where(rng.random(a.size) < 0.3, a, rng.permutation(a)).astype(a.dtype)
    else:
        a, b = random_ints(pt, rng), random_ints(pt, rng)
    directions = {"EQ": lax.eq, "NE": lax.ne, "GE": lax.ge, "GT": lax.gt, "LE": lax.le, "LT": lax.lt}
    results = _jax_run(jax, _all_of(list(directions.values())), a, b)
    for direction, expected in zip(directions, results, strict=True):
        np.testing.assert_array_equal(evaluate("compare", "pred", a, b, direction=direction), expected,
                                      err_msg=direction)


CONVERT_TYPES = ["pred", "s4", "s8", "s16", "s32", "s64", "u4", "u8", "u32", "u64", "f16", "bf16", "f32", "f64",
                 "f8e5m2", "f8e4m3fn", "c64", "c128"]


@pytest.mark.parametrize("src", CONVERT_TYPES)
def test_convert_agrees_with_jax(jax_modules, src):
    jax, lax, _, _ = jax_modules
    s = T[src]
    rng = np.random.default_rng(5)
    if s.is_pred:
        x = rng.random(64) < 0.5
    elif s.is_integer:
        x = random_ints(s, rng)
    elif s.is_complex:
        parts = random_floats(T["f64"], rng)
        x = np.empty(parts.shape, s.dtype)
        x.real, x.imag = parts, rng.permutation(parts)
    else:
        x = random_floats(s, rng)
        if s.bits < 32:
            x = x[np.isfinite(x.astype(np.float64)) | np.isnan(x.astype(np.float64))]
    targets = [T[dst] for dst in CONVERT_TYPES if not (s.is_complex and not T[dst].is_complex)]
    # (complex → real is left out: XLA rejects it, and jax inserts a real() first)
    results = _jax_run(jax, _all_of([lambda v, d=d: lax.convert_element_type(v, d.dtype) for d in targets]), x)
    for d, expected in zip(targets, results, strict=True):
        got = evaluate("convert", d.name, x)
        if d.is_float or d.is_complex:
            g = got.astype(np.complex128 if d.is_complex else np.float64)
            e = expected.astype(g.dtype)
            same = (g == e) | (np.isnan(g) & np.isnan(e))
            assert same.all(), f"{src}→{d}: {x[~same][:4]} gives {got[~same][:4]}, jax {expected[~same][:4]}"
        else:
            np.testing.assert_array_equal(got, expected, err_msg=f"{src}→{d}")


@pytest.mark.parametrize("type_name", ["f32", "bf16", "f16", "f64"])
def test_reduce_precision_agrees_with_jax(jax_modules, type_name):
    jax, lax, _, _ = jax_modules
    formats = [(5, 10), (8, 7), (3, 2), (8, 0), (11, 20), (4, 3)]
    x = random_floats(T[type_name], np.random.default_rng(6))
    results = _jax_run(jax, _all_of([lambda v, e=e, m=m: lax.reduce_precision(v, e, m) for e, m in formats]), x)
    for (e, m), expected in zip(formats, results, strict=True):
        got = evaluate("reduce-precision", type_name, x, exponent_bits=e, mantissa_bits=m)
        _check_float_result(f"reduce-precision({e}, {m})", type_name, got, expected, 0, [x])


@pytest.mark.parametrize("type_name", ["f32", "f64", "bf16"])
def test_clamp_select_agree_with_jax(jax_modules, type_name):
    jax, lax, _, _ = jax_modules
    pt = T[type_name]
    rng = np.random.default_rng(8)
    x = random_floats(pt, rng)
    x = x[~np.isnan(x.astype(np.float64))]
    low, high = np.array(-1.5).astype(pt.dtype), np.array(2.0).astype(pt.dtype)
    got = evaluate("clamp", type_name, low, x, high)
    _check_float_result("clamp", type_name, got, _jax_run(jax, lax.clamp, low, x, high), 0, [x])
    pred = rng.random(x.size) < 0.5
    got = evaluate("select", type_name, pred, x, -x)
    _check_float_result("select", type_name, got, _jax_run(jax, lax.select, pred, x, -x), 0, [x])


def _special_pairs(type_name: str) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of complex numbers whose parts are ±0, ±inf, NaN or finite (no denormals: XLA:CPU
    flushes them, "Edge values against XLA:CPU")."""
    parts = [0.0, -0.0, INF, -INF, NAN, -NAN, 1.0, -2.5, 7e10, 1e-3]
    values = [complex(r, i) for r in parts for i in parts]
    x, y = np.array([[a, c] for a in values for c in values]).T
    return x.astype(T[type_name].dtype), y.astype(T[type_name].dtype)


def test_complex_division_by_zero_and_infinite_parts():
    """XLA's EmitComplexDivide: a zero divisor gives copysign(inf, y.re) times x's parts, a finite x
    over an infinite y 0 * (x·v̄), an infinite x over a finite y inf * (u·ȳ) (numpy: NaN + NaN i for
    the last two, and x's parts over |y.re| for the first)."""
    x = np.array([2 - 3j, 1 + 1j, 1 + 1j, complex(INF, 1), complex(INF, 0), complex(NAN, NAN)], np.complex64)
    y = np.array([complex(INF, INF), complex(-0.0, 0), complex(0, -0.0), 1 + 1j, complex(INF, 0), 0j], np.complex64)
    want = [complex(-0.0, -0.0), complex(-INF, -INF), complex(INF, INF), complex(INF, -INF), complex(NAN, NAN),
            complex(NAN, NAN)]
    for type_name in ("c64", "c128"):
        got = evaluate("divide", type_name, x.astype(T[type_name].dtype), y.astype(T[type_name].dtype))
        assert_same(got, np.array(want, T[type_name].dtype))


@pytest.mark.parametrize("type_name", ["c64", "c128"])
def test_complex_division_of_special_values_agrees_with_jax(jax_modules, type_name):
    """Every pair of zeros, infinities, NaNs and finite parts: XLA:CPU's quotient (non-finite parts the
    same, NaN for NaN; finite ones within 8 ulps: XLA divides by the denominator with fused
    multiply-adds, numpy by its reciprocal)."""
    jax = jax_modules[0]
    x, y = _special_pairs(type_name)
    got, want = evaluate("divide", type_name, x, y), _jax_run(jax, lambda a, b: a / b, x, y)
    eps = np.finfo(got.real.dtype).eps
    scale = np.maximum(np.abs(want.real), np.abs(want.imag))
    for g, w in ((got.real, want.real), (got.imag, want.imag)):
        finite = np.isfinite(g) & np.isfinite(w)
        same = np.where(finite, np.abs(g - w) <= 8 * eps * np.where(np.isfinite(scale), scale, 0),
                        (g == w) | (np.isnan(g) & np.isnan(w)))
        bad = np.flatnonzero(~same)
        assert bad.size == 0, [(x[i], y[i], got[i], want[i]) for i in bad[:5]]


COMPLEX_UNARY = ["exponential", "log", "sqrt", "rsqrt", "sine", "cosine", "tanh", "tan", "exponential-minus-one",
                 "log-plus-one", "logistic", "abs", "sign"]
COMPLEX_BINARY = ["add", "subtract", "multiply", "divide", "power", "atan2"]


@pytest.mark.parametrize("type_name", ["c64", "c128"])
def test_complex_ops_agree_with_jax(jax_modules, type_name):
    """Relative agreement (2e-5 for c64, 1e-11 for c128): XLA:CPU's complex functions are formulas
    in the component precision, the evaluator's compute in complex128."""
    jax, lax, unary, binary = jax_modules
    pt = T[type_name]
    rng = np.random.default_rng(9)
    z = (rng.standard_normal(256) * 2 + 1j * rng.standard_normal(256) * 2).astype(pt.dtype)
    w = (rng.standard_normal(256) + 1j * rng.standard_normal(256)).astype(pt.dtype)
    tolerance = 5e-5 if type_name == "c64" else 1e-11
    part = "f32" if type_name == "c64" else "f64"
    results = _jax_run(jax, _all_of([unary[op] for op in COMPLEX_UNARY]), z)
    for opcode, expected in zip(COMPLEX_UNARY, results, strict=True):
        got = evaluate(opcode, part if opcode == "abs" else type_name, z)
        np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance, err_msg=opcode)
    results = _jax_run(jax, _all_of([binary[op] for op in COMPLEX_BINARY]), z, w)
    for opcode, expected in zip(COMPLEX_BINARY, results, strict=True):
        np.testing.assert_allclose(evaluate(opcode, type_name, z, w), expected, rtol=tolerance, atol=tolerance,
                                   err_msg=opcode)


@pytest.mark.parametrize("opcode,expected", [
    ("add", [False, True, True, False]), ("subtract", [False, True, True, False]),
    ("multiply", [False, False, False, True]), ("divide", [True, False, True, True]),
    ("remainder", [False, False, True, False]), ("power", [True, False, True, True]),
])
def test_pred_arithmetic_is_one_bit_unsigned(opcode, expected):
    """pred arithmetic as XLA's compiled backends do it (LLVM i1): x, y over (0,0), (0,1), (1,0), (1,1)."""
    import hlocc

    exe = hlocc.compile(f"ENTRY e {{ x = pred[4] parameter(0)\n y = pred[4] parameter(1)\n"
                        f" ROOT r = pred[4] {opcode}(x, y) }}")
    got = exe(np.array([0, 0, 1, 1], bool), np.array([0, 1, 0, 1], bool))
    assert got.tolist() == expected
